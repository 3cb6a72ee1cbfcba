// ShowerGenerator: batched inference with a trained generator: energies (and angles) in, showers
// in GeV in the data set's layout out. Holds the generator in eval mode; not thread-safe (one
// caller at a time; issue 5's batcher serialises requests).
#ifndef GANTRY_WORKERS_GAN_SHOWER_GENERATOR_H_
#define GANTRY_WORKERS_GAN_SHOWER_GENERATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "workers/data/shower_set.h"
#include "workers/gan/generator.h"
#include "workers/gan/model_config.h"

namespace gantry::gan {

struct GenerationRequest {
  std::vector<float> energy_gev;  // one shower per entry
  std::vector<float> theta_rad;   // same length for 3dgan-51; ignored (may be empty) otherwise
  uint64_t seed = 1;              // latent noise; same seed + request -> same showers
  int64_t batch_size = 128;
};

class ShowerGenerator {
 public:
  // Loads the generator of a checkpoint (optimiser state is skipped). Errors as ReadCheckpoint.
  static absl::StatusOr<std::unique_ptr<ShowerGenerator>> Load(const std::string& checkpoint_path);
  // Wraps an in-memory generator (shared with the caller; switched to eval mode).
  ShowerGenerator(ModelConfig config, Generator generator);

  // INVALID_ARGUMENT for empty/non-positive energies, missing angles, batch < 1.
  absl::StatusOr<data::ShowerSet> Generate(const GenerationRequest& request);

  const ModelConfig& config() const { return config_; }

 private:
  ModelConfig config_;
  Generator generator_;
};

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_SHOWER_GENERATOR_H_
