// ResumeTrainer: the trainer of a restarted rank, built from the job's latest checkpoint so that
// weights, both optimisers, the RNG, the counters and the current epoch's order continue exactly
// where the checkpoint was taken.
#ifndef GANTRY_WORKERS_RUNNER_RESUME_H_
#define GANTRY_WORKERS_RUNNER_RESUME_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "workers/gan/batch_source.h"
#include "jobspec/model_config.h"
#include "workers/gan/trainer.h"

namespace gantry::gan {
struct TrainingState;
}  // namespace gantry::gan

namespace gantry::runner {

// Reads the checkpoint at `path` with its optimisers and continues it on `batches` with `options`
// (options.seed must be the checkpoint's seed). INVALID_ARGUMENT when the checkpoint's model config
// or seed differ from the job's (`model`, options.seed), naming the first difference; the read's
// own errors otherwise (NOT_FOUND, DATA_LOSS, ...).
absl::StatusOr<std::unique_ptr<gan::Trainer>> ResumeTrainer(
    const std::string& path, const gan::ModelConfig& model,
    std::unique_ptr<gan::BatchSource> batches, const gan::TrainerOptions& options);

// OK when `state` was trained with `model` and `seed`; else INVALID_ARGUMENT naming the first
// differing config line.
absl::Status CheckCheckpointFitsJob(const gan::TrainingState& state, const gan::ModelConfig& model,
                                    uint64_t seed);

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_RESUME_H_
