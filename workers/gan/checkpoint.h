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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jobspec/model_config.h"
#include "workers/gan/discriminator.h"
#include "workers/gan/generator.h"

namespace gantry::gan {

// Everything needed to continue training bit for bit. Built by NewTrainingState or
// ReadCheckpoint; the Trainer owns one.
// The learning rate of each parameter group of the generator's optimizer as a multiple of the
// scheduled rate, in group order: the network (1); with template_learning_rate_scale != 1 the
// shower template; with template_residual_learning_rate_scale != 1 the last conv (the residual).
// A scale of 1 keeps its parameters in the network's group, so checkpoints of runs without these
// options keep their one-group layout.
std::vector<double> GeneratorGroupRateScales(const ModelConfig& config);

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
