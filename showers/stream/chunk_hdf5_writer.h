// ChunkHdf5Writer: the chunks of one GenerationService.Generate stream appended to a 3DGAN HDF5
// shower file (showers::ShowerFileWriter), each checked by CheckGenerateChunk first. The file is
// created with the first non-empty chunk, its layout from that chunk's grid.
#ifndef GANTRY_SHOWERS_STREAM_CHUNK_HDF5_WRITER_H_
#define GANTRY_SHOWERS_STREAM_CHUNK_HDF5_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gantry/v1/generation.pb.h"
#include "showers/shower_file_writer.h"

namespace gantry::showers {

// Not thread-safe: one stream, one writer.
class ChunkHdf5Writer {
 public:
  // Writes `expected` showers of `particle` ("Ele", "Gamma", "Pi0", "ChPi") to `path`.
  ChunkHdf5Writer(std::string path, std::string particle, int64_t expected)
      : path_(std::move(path)), particle_(std::move(particle)), expected_(expected) {}

  // Checks and appends one chunk. INVALID_ARGUMENT for a malformed chunk or a grid without a
  // 3DGAN layout; the file is then incomplete and the caller deletes it.
  absl::Status Append(const gantry::v1::GenerateChunk& chunk);
  // Closes the file (a no-op when no shower arrived and so no file was created).
  absl::Status Close();

  int64_t showers() const { return showers_; }

 private:
  const std::string path_;
  const std::string particle_;
  const int64_t expected_;
  std::vector<int64_t> grid_;  // (x, y, z) once the first chunk arrived
  std::unique_ptr<ShowerFileWriter> writer_;
  int64_t showers_ = 0;
};

}  // namespace gantry::showers

#endif  // GANTRY_SHOWERS_STREAM_CHUNK_HDF5_WRITER_H_
