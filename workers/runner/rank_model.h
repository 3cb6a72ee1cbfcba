// The model stage of a rank: the trainer it trains, built from its training input and its
// assignment: fresh (with the template fitted to the data), resumed exactly from the job's latest
// checkpoint (weights, optimisers, RNG, counters, the epoch's order), or fine-tuned from an initial
// model's weights (fresh optimisers and counters). A checkpoint fetched from the server is read
// once in a sandboxed child (`gantry-worker verify-checkpoint`) before this process loads it.
#ifndef GANTRY_WORKERS_RUNNER_RANK_MODEL_H_
#define GANTRY_WORKERS_RUNNER_RANK_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "workers/gan/trainer.h"
#include "workers/runner/rank_input.h"
#include "workers/runner/rank_log.h"
#include "workers/runner/rank_options.h"
#include "workers/runner/rank_plan.h"

namespace gantry::runner {

// The trainer's settings from the plan (batch, seed, epochs, schedule, precision) and the rank's
// options (device, threads, the steps-per-epoch test hook).
gan::TrainerOptions TrainerOptionsFor(const RankPlan& plan, const RankRunnerOptions& options);

// The trainer of `input` (see the top). Errors name the assignment field of the checkpoint they
// concern. `log` receives the "resumed from" / "fine-tuning from" lines.
absl::StatusOr<std::unique_ptr<gan::Trainer>> BuildRankTrainer(const RankPlan& plan,
                                                               const RankRunnerOptions& options,
                                                               TrainingInput input,
                                                               const RankLog& log);

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_RANK_MODEL_H_
