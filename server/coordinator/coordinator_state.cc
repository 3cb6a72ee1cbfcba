#include "server/coordinator/coordinator_state.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace gantry::server {

namespace v1 = ::gantry::v1;

const char* JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kRunning: return "running";
    case JobPhase::kRestarting: return "restarting";
    case JobPhase::kQueued: return "queued";
    case JobPhase::kCancelling: return "cancelling";
    case JobPhase::kCancellingQueued: return "cancelling (queued)";
    case JobPhase::kEnded: return "ended";
    case JobPhase::kEndedQueued: return "ended (queued)";
  }
  return "unknown";
}

bool ActiveJob::Queued() const {
  return phase == JobPhase::kQueued || phase == JobPhase::kCancellingQueued ||
         phase == JobPhase::kEndedQueued;
}

bool ActiveJob::Stopping() const {
  return phase == JobPhase::kCancelling || phase == JobPhase::kCancellingQueued || Ended();
}

bool ActiveJob::ClaimFailure() {
  if (phase != JobPhase::kRunning) return false;
  phase = JobPhase::kRestarting;
  return true;
}

void ActiveJob::ReleaseClaim() {
  if (phase == JobPhase::kRestarting) phase = JobPhase::kRunning;
}

bool ActiveJob::Requeue(int next_attempt) {
  attempt = next_attempt;
  leased = false;
  ranks.clear();
  rank_workers.clear();
  running_since = absl::InfinitePast();
  latest_step = -1;
  latest_step_at = absl::InfinitePast();
  step_seconds.clear();
  switch (phase) {
    case JobPhase::kCancelling:
      phase = JobPhase::kCancellingQueued;
      return false;
    case JobPhase::kEnded:
      phase = JobPhase::kEndedQueued;
      return false;
    case JobPhase::kCancellingQueued:
    case JobPhase::kEndedQueued:
      return false;
    default:
      phase = JobPhase::kQueued;
      return true;
  }
}

bool ActiveJob::PlaceAgain() {
  if (phase != JobPhase::kQueued) return false;
  phase = JobPhase::kRunning;
  return true;
}

bool ActiveJob::Cancel() {
  if (Stopping()) return false;
  phase = phase == JobPhase::kQueued ? JobPhase::kCancellingQueued : JobPhase::kCancelling;
  return true;
}

bool ActiveJob::End() {
  if (Ended()) return false;
  phase = Queued() ? JobPhase::kEndedQueued : JobPhase::kEnded;
  return true;
}

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

int CoordinatorState::RunningRanks(const std::string& worker_id) const {
  auto r = reports.find(worker_id);
  return r == reports.end() ? 0 : r->second.heartbeat.running_ranks_size();
}

CoordinatorSnapshot CoordinatorState::Snapshot() const {
  CoordinatorSnapshot snapshot;
  absl::MutexLock lock(&mu);
  snapshot.workers.reserve(registered.size());
  for (const auto& [id, request] : registered) {
    WorkerView& w = snapshot.workers.emplace_back();
    w.id = id;
    w.name = request.name();
    w.labels = {request.labels().begin(), request.labels().end()};
    w.device = request.device();
    w.slots = request.slots();
    w.free_slots = scheduler.FreeSlots(id);
    w.leased_slots = scheduler.LeasedSlots(id);
    w.running_ranks = RunningRanks(id);
    w.connected = links.count(id) > 0;
    w.live = scheduler.Live(id);
    w.draining = Draining(id);
  }
  snapshot.demand = scheduler.QueuedRequests();
  snapshot.queued_jobs = static_cast<int>(queued.size());
  return snapshot;
}

std::vector<std::string> CoordinatorState::RetireIdle(const std::vector<std::string>& worker_ids) {
  std::vector<std::string> retired;
  absl::MutexLock lock(&mu);
  for (const std::string& id : worker_ids) {
    if (scheduler.LeasedSlots(id) > 0 || RunningRanks(id) > 0 || Draining(id)) continue;
    scheduler.SetDraining(id, true);
    retired.push_back(id);
  }
  return retired;
}

void CoordinatorState::Unretire(const std::vector<std::string>& worker_ids) {
  absl::MutexLock lock(&mu);
  for (const std::string& id : worker_ids) {
    if (!Draining(id)) scheduler.SetDraining(id, false);
  }
}

void CoordinatorState::SetPoolNotes(const std::vector<std::string>& considered,
                                    std::map<std::string, std::string> notes) {
  absl::MutexLock lock(&mu);
  for (auto it = pool_notes.begin(); it != pool_notes.end();) {
    it = queued.count(it->first) ? std::next(it) : pool_notes.erase(it);
  }
  for (const std::string& id : considered) pool_notes.erase(id);
  for (auto& [id, note] : notes) pool_notes[id] = std::move(note);
}

}  // namespace gantry::server
