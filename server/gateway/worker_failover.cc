#include "server/gateway/worker_failover.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/status_details.h"

namespace gantry::server {

absl::Status CallFirstReachable(
    scheduler::GenerationRouter& router,
    const std::vector<scheduler::GenerationRouter::Candidate>& candidates,
    const grpc::ServerContext& context, const std::string& unreachable_message,
    const std::string& unreachable_reason, std::string* worker_name,
    absl::FunctionRef<WorkerAttempt(const scheduler::GenerationRouter::Candidate&)> call) {
  std::vector<std::string> unreachable;
  for (const scheduler::GenerationRouter::Candidate& c : candidates) {
    *worker_name = c.name;
    const WorkerAttempt a = call(c);
    if (a.status.code() == absl::StatusCode::kUnavailable && !a.answered &&
        !context.IsCancelled()) {
      router.MarkUnreachable(c.worker_id, absl::Now());
      unreachable.push_back(absl::StrCat(c.name, " (", c.endpoint, "): ", a.status.message()));
      continue;
    }
    router.MarkReachable(c.worker_id);
    return a.status;
  }
  absl::Status none = absl::UnavailableError(
      absl::StrCat(unreachable_message, ": ", absl::StrJoin(unreachable, "; ")));
  return unreachable_reason.empty() ? none : SetErrorReason(std::move(none), unreachable_reason);
}

}  // namespace gantry::server
