// WriteShowerStream: the chunks of a GenerationService.Generate stream written into a 3DGAN HDF5
// shower file (showers::ChunkHdf5Writer, the writer the CLI uses), for the HTTP API's download.
#ifndef GANTRY_SERVER_HTTP_SHOWER_DOWNLOAD_H_
#define GANTRY_SERVER_HTTP_SHOWER_DOWNLOAD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/generation.pb.h"

namespace gantry::server::http {

// Calls `next` until it returns false, appending each chunk to a new file at `path` (created on
// the first chunk, its layout from the chunk's shape), each checked by showers::CheckGenerateChunk.
// Returns the number of showers written; INTERNAL for a malformed chunk (the in-process stream
// broke its contract; the file is then incomplete: the caller deletes it).
absl::StatusOr<int64_t> WriteShowerStream(
    const std::function<bool(gantry::v1::GenerateChunk*)>& next, int64_t expected,
    const std::string& particle, const std::string& path);

}  // namespace gantry::server::http

#endif  // GANTRY_SERVER_HTTP_SHOWER_DOWNLOAD_H_
