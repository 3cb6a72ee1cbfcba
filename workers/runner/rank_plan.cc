#include "workers/runner/rank_plan.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/build_info.h"
#include "base/status_macros.h"

namespace gantry::runner {
namespace {

absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

bool IsSha256Hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string CodeVersion() { return absl::StrCat(GantryVersion(), "+", GantryGitCommit()); }

absl::StatusOr<v1::Assignment> ReadAssignmentFile(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("--assignment: a file path is required");
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("assignment file ", path, " cannot be opened"));
  std::stringstream bytes;
  bytes << in.rdbuf();
  v1::Assignment assignment;
  if (!assignment.ParseFromString(bytes.str())) {
    return absl::InvalidArgumentError(
        absl::StrCat("assignment file ", path, " is not a serialized gantry.v1.Assignment"));
  }
  return assignment;
}

absl::Status ResolveDataPipeline(const v1::DataPipeline& spec, int64_t batch_cells,
                                 unsigned hardware_threads, RankPlan* plan) {
  if (spec.prefetch_batches() < 0) {
    return Bad("spec.data_pipeline.prefetch_batches", "must be >= 0 (0 = automatic)");
  }
  if (spec.loader_threads() < 0) {
    return Bad("spec.data_pipeline.loader_threads", "must be >= 0 (0 = automatic)");
  }
  constexpr int64_t kQueueBytes = int64_t{512} << 20;
  const int64_t batch_bytes = std::max<int64_t>(1, batch_cells) * 4;
  plan->prefetch_batches =
      spec.prefetch_batches() > 0
          ? spec.prefetch_batches()
          : static_cast<int>(std::clamp<int64_t>(kQueueBytes / batch_bytes, 1, 4));
  plan->loader_threads =
      spec.loader_threads() > 0 ? spec.loader_threads() : (hardware_threads >= 4 ? 2 : 1);
  return absl::OkStatus();
}

namespace {

// The assignment's own fields: job, world, rank, rendezvous, threads, and no resume yet.
absl::Status CheckAssignment(const v1::Assignment& a) {
  if (a.job_id().empty()) return Bad("assignment.job_id", "is empty");
  if (a.world_size() < 1 || a.world_size() > 256) {
    return Bad("assignment.world_size", absl::StrCat(a.world_size(), " is not in 1..256"));
  }
  if (a.rank() < 0 || a.rank() >= a.world_size()) {
    return Bad("assignment.rank", absl::StrCat(a.rank(), " is not in 0..", a.world_size() - 1,
                                               " (world_size ", a.world_size(), ")"));
  }
  if (a.world_size() > 1) {
    if (a.rendezvous_host().empty()) {
      return Bad("assignment.rendezvous_host", "is empty but world_size > 1");
    }
    if (a.rendezvous_port() < 1 || a.rendezvous_port() > 65535) {
      return Bad("assignment.rendezvous_port", absl::StrCat(a.rendezvous_port(), " is not a port"));
    }
  }
  if (a.threads() < 0) return Bad("assignment.threads", "must be >= 0");
  if (a.attempt() < 0) return Bad("assignment.attempt", "must be >= 0");
  if (a.collective_timeout_ms() < 0) {
    return Bad("assignment.collective_timeout_ms", "must be >= 0 (0 = the worker's default)");
  }
  for (const auto& [field, sha] :
       {std::pair<const char*, const std::string&>{"assignment.resume_checkpoint_sha256",
                                                   a.resume_checkpoint_sha256()},
        std::pair<const char*, const std::string&>{"assignment.initial_checkpoint_sha256",
                                                   a.initial_checkpoint_sha256()}}) {
    if (!sha.empty() && !IsSha256Hex(sha)) {
      return Bad(field, absl::StrCat("\"", sha, "\" is not a sha256 (64 hex digits)"));
    }
  }
  return absl::OkStatus();
}

// The spec's world size (when given) and its dataset reference.
absl::Status CheckSpecWorldAndDataset(const v1::JobSpec& spec, int world_size) {
  if (spec.world_size() != 0 && spec.world_size() != world_size) {
    return Bad("spec.world_size",
               absl::StrCat(spec.world_size(), " but the assignment says ", world_size));
  }
  if (spec.dataset().empty()) return Bad("spec.dataset", "is empty");
  if (!absl::StartsWith(spec.dataset(), "ds-") && !absl::StartsWith(spec.dataset(), "toymc:") &&
      !absl::StartsWith(spec.dataset(), "file://")) {
    return Bad("spec.dataset", absl::StrCat("\"", spec.dataset(),
                                            "\" is not ds-<id>, toymc:<spec> or file:///path.h5"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RankPlan> PlanRank(const v1::Assignment& a) {
  RETURN_IF_ERROR(CheckAssignment(a));
  const v1::JobSpec& spec = a.spec();
  RETURN_IF_ERROR(CheckSpecWorldAndDataset(spec, a.world_size()));
  RankPlan plan;
  ASSIGN_OR_RETURN(static_cast<jobspec::JobPlan&>(plan), jobspec::PlanJob(spec));
  plan.assignment = a;
  plan.threads = a.threads();
  if (plan.baseline.has_value()) {
    if (a.world_size() != 1) {
      return Bad("spec.world_size",
                 absl::StrCat(a.world_size(), ": a baseline (", spec.model_preset(),
                              ") is fitted by one rank; set 1"));
    }
    if (!a.initial_checkpoint_sha256().empty()) {
      return Bad("spec.initial_model",
                 absl::StrCat("a baseline (", spec.model_preset(), ") is fitted, not fine-tuned"));
    }
  }
  const gan::ModelConfig& m = plan.model;
  const int64_t batch = plan.batch_per_rank > 0 ? plan.batch_per_rank : m.default_batch;
  RETURN_IF_ERROR(ResolveDataPipeline(spec.data_pipeline(),
                                      batch * m.grid[0] * m.grid[1] * m.grid[2],
                                      std::thread::hardware_concurrency(), &plan));
  return plan;
}

}  // namespace gantry::runner
