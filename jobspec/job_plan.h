// JobPlan: what a job spec asks of its ranks (the model from the preset + overrides +
// hyper-parameters, epochs, batch, seed, hold-out or fold, checkpoint triggers), with every check of
// the spec's meaning. The one authority on a spec: gantry-server calls PlanJob at submission, so it
// refuses exactly what a worker would, and each rank plans itself from the same function
// (workers/runner/rank_plan.h). Torch-free.
#ifndef GANTRY_JOBSPEC_JOB_PLAN_H_
#define GANTRY_JOBSPEC_JOB_PLAN_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "gantry/v1/training.pb.h"
#include "jobspec/model_config.h"
#include "jobspec/presets.h"

namespace gantry::jobspec {

// Bounds of a job spec (docs/API.md).
inline constexpr int kMaxEpochs = 10000;
inline constexpr int kMaxBatchPerRank = 4096;
inline constexpr int kMaxFolds = 20;  // JobSpec.data_split.folds and StudySpec.folds
inline constexpr int kMaxKeepLast = 1000;
inline constexpr int kMaxCheckpointEverySteps = 1000000;
inline constexpr double kMaxCheckpointEveryMinutes = 10080;  // a week
inline constexpr double kMaxLearningRate = 10;
inline constexpr double kMaxHoldoutFraction = 0.9;
inline constexpr int kMaxValidationEnergies = 1000;
inline constexpr int kMaxShowersPerBin = 100000;
inline constexpr int kMaxPrefetchBatches = 1024;
inline constexpr int kMaxLoaderThreads = 256;

// spec.validation.leave_out: the energies [min_gev, max_gev] training skips.
struct LeftOutBand {
  double min_gev = 0;
  double max_gev = 0;
  bool Contains(double energy_gev) const { return energy_gev >= min_gev && energy_gev <= max_gev; }
};

struct JobPlan {
  gan::ModelConfig model;  // preset + overrides + hyper-parameters, validated
  // A baseline-* preset: the job fits a no-network baseline (workers/baseline) instead of training;
  // `model` is then 3dgan-25's config, for the data layout only.
  std::optional<BaselineKind> baseline;
  int64_t epochs = 1;
  int64_t batch_per_rank = 0;  // 0 only for a baseline (no optimiser step)
  uint64_t seed = 0;
  bool validation = true;
  double holdout_fraction = 0.1;
  std::optional<LeftOutBand> leave_out;  // needs validation
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
  // checkpoint_policy.keep_best: rank 0 validates the start (step 0, a fresh start only) and every
  // checkpoint and uploads `best_metric` of that validation as the checkpoint's fom (needs
  // validation).
  bool keep_best = false;
  std::string best_metric = "fom";
  // checkpoint_policy.register_best: the server registers the lowest-fom checkpoint (keep_best).
  bool register_best = false;
  bool scale_lr_with_world_size = false;
  int64_t warmup_epochs = 0;
  double lr_decay_to = 1.0;  // gan::TrainerOptions::lr_decay_to
  // hyper_parameters.precision TRAINING_PRECISION_BF16_AUTOCAST: gan::TrainerOptions::bf16_autocast
  // (GPU ranks only).
  bool bf16_autocast = false;
};

// The validation metrics checkpoint_policy.best_metric may name: each lower-is-better, each in
// every validation (the field-standard ones unless a worker turns them off).
inline constexpr const char* kBestMetrics[] = {
    "fom", "eprof", "pos", "mre_sampling_fraction", "sep_mean", "fpd", "auc_features", "auc_cells"};

// The plan of `spec`, or INVALID_ARGUMENT "<field>: <what to change>" naming the first field of
// the spec that is missing, out of bounds or inconsistent (spec.model_preset,
// spec.model_overrides, spec.hyper_parameters.*, spec.validation.*, spec.checkpoint_policy.*,
// spec.data_split.*, spec.data_pipeline.*, and a baseline's spec.world_size and
// spec.initial_model). What the spec names outside itself (dataset, initial model, pool) is the
// server's to resolve.
absl::StatusOr<JobPlan> PlanJob(const gantry::v1::JobSpec& spec);

}  // namespace gantry::jobspec

#endif  // GANTRY_JOBSPEC_JOB_PLAN_H_
