#include "server/http/shower_download.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "showers/stream/chunk_hdf5_writer.h"

namespace gantry::server::http {

absl::StatusOr<int64_t> WriteShowerStream(
    const std::function<bool(gantry::v1::GenerateChunk*)>& next, int64_t expected,
    const std::string& particle, const std::string& path) {
  showers::ChunkHdf5Writer writer(path, particle, expected);
  gantry::v1::GenerateChunk chunk;
  while (next(&chunk)) {
    if (absl::Status appended = writer.Append(chunk); !appended.ok()) {
      if (!absl::IsInvalidArgument(appended)) return appended;
      return absl::InternalError(
          absl::StrCat("the generation stream sent a bad chunk: ", appended.message()));
    }
  }
  RETURN_IF_ERROR(writer.Close());
  return writer.showers();
}

}  // namespace gantry::server::http
