// GenerateChunk checks: what a gantry.v1.GenerateChunk must hold before its showers are written
// (shape, byte count, conditions, offset, grid), and the 3DGAN file particle of a model. Shared by
// the CLI's `gantry generate` output and the server's HTTP download.
#ifndef GANTRY_SHOWERS_STREAM_GENERATE_CHUNK_H_
#define GANTRY_SHOWERS_STREAM_GENERATE_CHUNK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gantry/v1/common.pb.h"
#include "gantry/v1/generation.pb.h"

namespace gantry::showers {

// The largest cell count along one axis of a streamed grid.
inline constexpr int64_t kMaxStreamGridAxis = 1024;

// "Ele", "Gamma", "Pi0" or "ChPi": the particle name 3DGAN files carry for a model's particle.
std::string FileParticle(gantry::v1::Particle particle);
// The particle of such a name ("Ele" -> PARTICLE_ELECTRON), PARTICLE_UNSPECIFIED for any other.
gantry::v1::Particle ParticleOfFileName(const std::string& name);

// OK when `chunk` may follow `showers_so_far` of `expected` showers of the stream: shape [n,x,y,z]
// (axes 1..kMaxStreamGridAxis), n*x*y*z float32 bytes, one condition per shower, offset equal to
// `showers_so_far`, at most `expected` in all, and the grid (x,y,z) equal to `grid` unless `grid`
// is empty (the first chunk). INVALID_ARGUMENT saying which otherwise.
absl::Status CheckGenerateChunk(const gantry::v1::GenerateChunk& chunk, int64_t showers_so_far,
                                int64_t expected, const std::vector<int64_t>& grid);

}  // namespace gantry::showers

#endif  // GANTRY_SHOWERS_STREAM_GENERATE_CHUNK_H_
