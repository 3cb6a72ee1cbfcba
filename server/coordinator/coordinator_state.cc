#include "server/coordinator/coordinator_state.h"

#include <algorithm>
#include <utility>

namespace gantry::server {

namespace v1 = ::gantry::v1;

int ActiveJob::CountRanks(v1::RankPhase phase) const {
  int n = 0;
  for (const auto& [rank, state] : ranks) n += state.phase == phase;
  return n;
}

double ActiveJob::MedianStepSeconds() const {
  if (step_seconds.empty()) return 0;
  std::vector<double> sorted = step_seconds;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  return sorted[sorted.size() / 2];
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

void CoordinatorState::SendCheckpointAndStop(const ActiveJob& job, const std::string& worker,
                                             const std::string& reason) {
  auto link = links.find(worker);
  if (link == links.end()) return;
  v1::ServerMessage message;
  v1::CheckpointAndStop* stop = message.mutable_checkpoint_and_stop();
  stop->set_job_id(job.id);
  stop->set_attempt(job.attempt);
  stop->set_reason(reason);
  link->second->Send(std::move(message));
}

}  // namespace gantry::server
