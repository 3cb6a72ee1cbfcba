// Checkpoint: one sealed file holding a complete training state (both networks, both RMSprop
// optimisers, counters, RNG state, model config with its data normalisation). Format in
// docs/MODELS.md: a text header with the payload's SHA-256 and size, then a torch archive.
#ifndef GANTRY_WORKERS_GAN_CHECKPOINT_H_
#define GANTRY_WORKERS_GAN_CHECKPOINT_H_

#include <ATen/core/Generator.h>
#include <torch/optim/rmsprop.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "workers/gan/discriminator.h"
#include "workers/gan/generator.h"
#include "jobspec/model_config.h"

namespace gantry::gan {

// Everything needed to continue training bit for bit. Built by NewTrainingState or
// ReadCheckpoint; the Trainer owns one.
// With ModelConfig::template_learning_rate_scale != 1, the index of the shower template's parameter
// group in the generator's optimizer (the network is group 0).
inline constexpr size_t kTemplateParamGroup = 1;

struct TrainingState {
  ModelConfig config;
  uint64_t seed = 0;
  Generator generator{nullptr};
  Discriminator discriminator{nullptr};
  std::unique_ptr<torch::optim::RMSprop> generator_optimizer;
  std::unique_ptr<torch::optim::RMSprop> discriminator_optimizer;
  at::Generator rng;         // every random draw of training (noise, flips, dropout, shuffling)
  int64_t epoch = 0;         // completed epochs
  int64_t step = 0;          // completed training iterations (all epochs)
  int64_t epoch_cursor = 0;  // samples of the current epoch already used (by all ranks)
  at::Tensor permutation;    // sample order of the current epoch (int64), undefined before start
};

// Fresh networks initialised from `seed` (torch default init drawn from a generator seeded with
// it) and optimisers with the config's RMSprop settings. INVALID_ARGUMENT for a bad config.
absl::StatusOr<TrainingState> NewTrainingState(const ModelConfig& config, uint64_t seed);

// Writes atomically (temp file + rename). INTERNAL / UNAVAILABLE on I/O or serialisation errors.
absl::Status WriteCheckpoint(const std::string& path, const TrainingState& state);

// Reads and verifies a checkpoint. NOT_FOUND: no file; DATA_LOSS: truncated, checksum mismatch or
// undecodable payload; INVALID_ARGUMENT: not a gantry checkpoint or an inconsistent config;
// FAILED_PRECONDITION: a baseline's checkpoint (no networks; workers/baseline reads it).
// With load_optimizers = false the optimiser state is skipped (generation only).
absl::StatusOr<TrainingState> ReadCheckpoint(const std::string& path, bool load_optimizers = true);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_CHECKPOINT_H_
