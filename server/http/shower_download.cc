#include "server/http/shower_download.h"

#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "showers/shower_file_writer.h"

namespace gantry::server::http {

namespace v1 = ::gantry::v1;

std::string FileParticle(v1::Particle particle) {
  switch (particle) {
    case v1::PARTICLE_PHOTON:
      return "Gamma";
    case v1::PARTICLE_PI0:
      return "Pi0";
    case v1::PARTICLE_CHARGED_PION:
      return "ChPi";
    default:
      return "Ele";
  }
}

absl::StatusOr<int64_t> WriteShowerStream(const std::function<bool(v1::GenerateChunk*)>& next,
                                          int64_t expected, const std::string& particle,
                                          const std::string& path) {
  std::unique_ptr<showers::ShowerFileWriter> writer;
  std::vector<int64_t> grid;
  int64_t written = 0;
  v1::GenerateChunk chunk;
  while (next(&chunk)) {
    if (chunk.shape_size() != 4 || chunk.shape(0) < 0 || chunk.shape(1) <= 0 ||
        chunk.shape(2) <= 0 || chunk.shape(3) <= 0 || chunk.shape(1) > 1024 ||
        chunk.shape(2) > 1024 || chunk.shape(3) > 1024) {
      return absl::InternalError(absl::StrCat("a generated chunk has shape [",
                                              absl::StrJoin(chunk.shape(), ","),
                                              "], expected [n,x,y,z]"));
    }
    const int64_t n = chunk.shape(0);
    if (n == 0) continue;
    const int64_t per_shower = chunk.shape(1) * chunk.shape(2) * chunk.shape(3);
    if (n > expected - written || chunk.offset() != written ||
        static_cast<int64_t>(chunk.showers().size()) != n * per_shower * 4 ||
        chunk.conditions_size() != n) {
      return absl::InternalError(
          absl::StrCat("a generated chunk at offset ", chunk.offset(), " does not fit: ", n,
                       " showers, ", chunk.showers().size(), " bytes, ", chunk.conditions_size(),
                       " conditions after ", written, " of ", expected, " showers"));
    }
    if (writer == nullptr) {
      grid.assign(chunk.shape().begin() + 1, chunk.shape().end());
      ASSIGN_OR_RETURN(showers::Layout layout,
                       showers::Layout3DGanForShape({grid[0], grid[1], grid[2]}));
      showers::ShowerFileWriterOptions options;
      options.layout = layout;
      options.particle = particle;
      ASSIGN_OR_RETURN(writer, showers::ShowerFileWriter::Create(path, options));
    } else if (!std::equal(grid.begin(), grid.end(), chunk.shape().begin() + 1)) {
      return absl::InternalError("generated chunks changed their grid within one stream");
    }
    // Packed little-endian float32 on the wire; the server runs on little-endian machines.
    std::vector<float> cells(static_cast<size_t>(n * per_shower));
    std::memcpy(cells.data(), chunk.showers().data(), chunk.showers().size());
    std::vector<float> energy(n), theta(n);
    for (int64_t i = 0; i < n; ++i) {
      energy[i] = static_cast<float>(chunk.conditions(i).energy_gev());
      theta[i] = static_cast<float>(chunk.conditions(i).theta_rad());
    }
    RETURN_IF_ERROR(writer->Append(cells.data(), n, energy.data(), theta.data()));
    written += n;
  }
  if (writer != nullptr) RETURN_IF_ERROR(writer->Close());
  return written;
}

}  // namespace gantry::server::http
