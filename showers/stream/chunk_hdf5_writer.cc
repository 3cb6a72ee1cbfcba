#include "showers/stream/chunk_hdf5_writer.h"

#include <cstring>

#include "base/status_macros.h"
#include "showers/stream/generate_chunk.h"

namespace gantry::showers {

absl::Status ChunkHdf5Writer::Append(const gantry::v1::GenerateChunk& chunk) {
  RETURN_IF_ERROR(CheckGenerateChunk(chunk, showers_, expected_, grid_));
  const int64_t n = chunk.shape(0);
  if (n == 0) return absl::OkStatus();
  if (writer_ == nullptr) {
    const std::vector<int64_t> grid(chunk.shape().begin() + 1, chunk.shape().end());
    ASSIGN_OR_RETURN(Layout layout, Layout3DGanForShape({grid[0], grid[1], grid[2]}));
    ShowerFileWriterOptions options;
    options.layout = layout;
    options.particle = particle_;
    ASSIGN_OR_RETURN(writer_, ShowerFileWriter::Create(path_, options));
    grid_ = grid;
  }
  // Packed little-endian float32 on the wire; gantry runs on little-endian machines.
  std::vector<float> cells(chunk.showers().size() / sizeof(float));
  std::memcpy(cells.data(), chunk.showers().data(), chunk.showers().size());
  std::vector<float> energy(n), theta(n);
  for (int64_t i = 0; i < n; ++i) {
    energy[i] = static_cast<float>(chunk.conditions(i).energy_gev());
    theta[i] = static_cast<float>(chunk.conditions(i).theta_rad());
  }
  RETURN_IF_ERROR(writer_->Append(cells.data(), n, energy.data(), theta.data()));
  showers_ += n;
  return absl::OkStatus();
}

absl::Status ChunkHdf5Writer::Close() {
  if (writer_ == nullptr) return absl::OkStatus();
  return writer_->Close();
}

}  // namespace gantry::showers
