// BatchBackend: what the dynamic batcher runs a batch on (the LibTorch generator in the daemon, a
// fake in unit tests), with the shower descriptions it is fed. Torch-free interface.
#ifndef GANTRY_WORKERS_SERVING_BATCH_BACKEND_H_
#define GANTRY_WORKERS_SERVING_BATCH_BACKEND_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gantry::serving {

// One shower to generate: its latent noise follows from (seed, index) (CounterRng), so the
// result does not depend on which batch it lands in.
struct ShowerSpec {
  uint64_t seed = 0;
  int64_t index = 0;  // position in its request
  float energy_gev = 0;
  float theta_rad = 0;    // ignored by fixed-angle models
  bool bfloat16 = false;  // computed in bfloat16 (returned as float32 all the same)
};

// What a served model is, as far as request planning is concerned.
struct ModelTraits {
  std::array<int64_t, 3> grid{25, 25, 25};  // (x, y, z) cells of one shower
  bool variable_angle = false;              // conditioned on theta (3dgan-51)
  // The angle range the model was trained on (used when the served model carries none).
  double theta_min_rad = 1.0471975511965976;
  double theta_max_rad = 2.0943951023931953;
  // Empty when the backend computes in bfloat16; else why not (the FAILED_PRECONDITION message).
  std::string bf16_unavailable = "this worker does not compute in bfloat16; use PRECISION_FP32";
  int64_t cells_per_shower() const { return grid[0] * grid[1] * grid[2]; }
};

class BatchBackend {
 public:
  virtual ~BatchBackend() = default;
  // Generates showers.size() showers into `out` (showers.size() * cells_per_shower floats, GeV,
  // shower-major). Called by one thread at a time (the backend need not be thread-safe). A batch
  // may mix float32 and bfloat16 showers (ShowerSpec::bfloat16).
  virtual absl::Status RunBatch(const std::vector<ShowerSpec>& showers, float* out) = 0;
  virtual const ModelTraits& traits() const = 0;
  // Bytes the loaded model holds (parameters and buffers); what the model cache budgets.
  virtual int64_t memory_bytes() const = 0;
};

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_BATCH_BACKEND_H_
