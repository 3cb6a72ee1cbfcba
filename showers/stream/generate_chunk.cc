#include "showers/stream/generate_chunk.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gantry::showers {

namespace v1 = ::gantry::v1;

v1::Particle ParticleOfFileName(const std::string& name) {
  if (name == "Ele") return v1::PARTICLE_ELECTRON;
  if (name == "Gamma") return v1::PARTICLE_PHOTON;
  if (name == "Pi0") return v1::PARTICLE_PI0;
  if (name == "ChPi") return v1::PARTICLE_CHARGED_PION;
  return v1::PARTICLE_UNSPECIFIED;
}

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

absl::Status CheckGenerateChunk(const v1::GenerateChunk& chunk, int64_t showers_so_far,
                                int64_t expected, const std::vector<int64_t>& grid) {
  const auto axis_ok = [&](int i) {
    return chunk.shape(i) > 0 && chunk.shape(i) <= kMaxStreamGridAxis;
  };
  if (chunk.shape_size() != 4 || chunk.shape(0) < 0 || !axis_ok(1) || !axis_ok(2) || !axis_ok(3)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk at offset ", chunk.offset(), " has shape [", absl::StrJoin(chunk.shape(), ","),
        "], expected [n,x,y,z] with x, y, z from 1 to ", kMaxStreamGridAxis));
  }
  const int64_t n = chunk.shape(0);
  if (n == 0) return absl::OkStatus();
  const int64_t per_shower = chunk.shape(1) * chunk.shape(2) * chunk.shape(3);
  // Before any product with n: a hostile n must not overflow the byte count.
  if (n > expected - showers_so_far) {
    return absl::InvalidArgumentError(absl::StrCat("the server sent more showers (", n, " after ",
                                                   showers_so_far, ") than requested (", expected,
                                                   ")"));
  }
  if (static_cast<int64_t>(chunk.showers().size()) != n * per_shower * 4) {
    return absl::InvalidArgumentError(absl::StrCat("chunk at offset ", chunk.offset(), " carries ",
                                                   chunk.showers().size(), " bytes for ", n,
                                                   " showers of ", per_shower, " float32 cells"));
  }
  if (chunk.conditions_size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("chunk at offset ", chunk.offset(), " has ",
                                                   chunk.conditions_size(), " conditions for ", n,
                                                   " showers"));
  }
  if (chunk.offset() != showers_so_far) {
    return absl::InvalidArgumentError(absl::StrCat("chunk at offset ", chunk.offset(),
                                                   " arrived after ", showers_so_far, " showers"));
  }
  if (!grid.empty() && !std::equal(grid.begin(), grid.end(), chunk.shape().begin() + 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk at offset ", chunk.offset(), " has grid ", absl::StrJoin(chunk.shape(), "x"),
        " unlike the earlier ", absl::StrJoin(grid, "x")));
  }
  return absl::OkStatus();
}

}  // namespace gantry::showers
