#include "server/coordinator_state.h"

#include <utility>

namespace gantry::server {

namespace v1 = ::gantry::v1;

int ActiveJob::CountRanks(v1::RankPhase phase) const {
  int n = 0;
  for (const auto& [rank, state] : ranks) n += state.phase == phase;
  return n;
}

std::string CoordinatorState::WorkerName(const std::string& worker_id) const {
  auto r = registered.find(worker_id);
  return r == registered.end() ? worker_id : r->second.name();
}

void CoordinatorState::SendCancellation(const ActiveJob& job, const std::string& reason) {
  for (const std::string& worker : job.workers) {
    auto link = links.find(worker);
    if (link == links.end()) continue;
    v1::ServerMessage message;
    message.mutable_cancellation()->set_job_id(job.id);
    message.mutable_cancellation()->set_reason(reason);
    link->second->Send(std::move(message));
  }
}

}  // namespace gantry::server
