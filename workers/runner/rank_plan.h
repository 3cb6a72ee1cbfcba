// RankPlan: what one rank of a job will do: the job's plan (jobspec/job_plan.h) from the spec in
// its Assignment, checked against the assignment. Torch-free, so the checks can be tested and
// reused without LibTorch.
#ifndef GANTRY_WORKERS_RUNNER_RANK_PLAN_H_
#define GANTRY_WORKERS_RUNNER_RANK_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/worker.pb.h"
#include "jobspec/job_plan.h"

namespace gantry::runner {

// The job's plan (jobspec::PlanJob, the checks the server made at submission) and what this rank
// adds: its assignment, threads, and the input pipeline resolved on this machine.
struct RankPlan : jobspec::JobPlan {
  gantry::v1::Assignment assignment;
  int threads = 0;  // 0 = leave LibTorch's default
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
