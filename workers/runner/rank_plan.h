// RankPlan: what one rank of a job will do, derived from and checked against its Assignment
// (model config from the preset + overrides + hyper-parameters, epochs, batch, seed, hold-out,
// checkpoint policy). Torch-free, so the checks can be tested and reused without LibTorch.
#ifndef GANTRY_WORKERS_RUNNER_RANK_PLAN_H_
#define GANTRY_WORKERS_RUNNER_RANK_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/worker.pb.h"
#include "workers/baseline/baseline_sampler.h"
#include "workers/gan/model_config.h"

namespace gantry::runner {

struct RankPlan {
  gantry::v1::Assignment assignment;
  gan::ModelConfig model;  // preset + overrides + hyper-parameters, validated
  // A baseline-* preset: the job fits a no-network baseline (workers/baseline) instead of training;
  // `model` is then 3dgan-25's config, for the data layout only.
  std::optional<baseline::BaselineKind> baseline;
  int64_t epochs = 1;
  int64_t batch_per_rank = 0;  // 0 = the preset's default batch
  uint64_t seed = 0;
  int threads = 0;  // 0 = leave LibTorch's default
  bool validation = true;
  double holdout_fraction = 0.1;
  // K-fold (spec.data_split): folds > 0 replaces the hold-out by fold `validation_fold` of `folds`
  // seeded by `split_seed`.
  int folds = 0;
  int validation_fold = 0;
  uint64_t split_seed = 0;
  // Checkpoint triggers on rank 0 (the union; 0 = off each): at the end of every N-th epoch, every
  // N steps, and when this many minutes passed since the last save. The end of training always
  // saves.
  int checkpoint_every_epochs = 0;
  int64_t checkpoint_every_steps = 0;
  double checkpoint_every_minutes = 0;
  int keep_last = 1;  // checkpoint files kept in the rank's work dir
  // checkpoint_policy.keep_best: rank 0 validates at every periodic checkpoint and uploads the
  // fom with it (needs validation).
  bool keep_best = false;
  bool scale_lr_with_world_size = false;
  int64_t warmup_epochs = 0;
  double lr_decay_to = 1.0;  // gan::TrainerOptions::lr_decay_to
  // The input pipeline (spec.data_pipeline, 0 = automatic; ResolveDataPipeline): batches read
  // ahead, and background loader threads.
  int prefetch_batches = 4;
  int loader_threads = 1;
};

// The automatic pipeline: `prefetch_batches` = 4 batches, fewer when the queue's images would
// exceed 512 MiB (never below 1); `loader_threads` = 1 on machines with fewer than 4 hardware
// threads (the trainer uses them), else 2. Values > 0 are taken as given; negative ones are
// INVALID_ARGUMENT naming spec.data_pipeline.<field>.
absl::Status ResolveDataPipeline(const gantry::v1::DataPipeline& spec, int64_t batch_cells,
                                 unsigned hardware_threads, RankPlan* plan);

// Reads a binary-serialized gantry.v1.Assignment. NOT_FOUND / INVALID_ARGUMENT (undecodable).
absl::StatusOr<gantry::v1::Assignment> ReadAssignmentFile(const std::string& path);

// Checks the assignment and resolves the plan. INVALID_ARGUMENT names the bad field (e.g.
// "assignment.rank: 3 is not below world_size 2", "spec.hyper_parameters.optimizer: ...").
// resume_checkpoint_sha256 and initial_checkpoint_sha256, when set, must be 64 hex digits.
absl::StatusOr<RankPlan> PlanRank(const gantry::v1::Assignment& assignment);

// "0.1.0+<commit>" (gantry/base/build_info.h).
std::string CodeVersion();

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_RANK_PLAN_H_
