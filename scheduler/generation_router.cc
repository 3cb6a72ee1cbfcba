#include "scheduler/generation_router.h"

#include <algorithm>
#include <tuple>

namespace gantry::scheduler {

void GenerationRouter::OnRegister(const std::string& worker_id,
                                  const gantry::v1::RegisterRequest& request) {
  absl::MutexLock lock(&mu_);
  Worker& w = workers_[worker_id];
  w.view.worker_id = worker_id;
  w.view.name = request.name();
  w.view.endpoint = request.generation_endpoint();
  w.secret = request.generation_secret();
  w.view.loaded_models.clear();
  w.view.reported_active_requests = 0;
  w.view.reported_queued_showers = 0;
  w.unreachable_until = absl::InfinitePast();
}

void GenerationRouter::OnConnect(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) it->second.view.connected = true;
}

void GenerationRouter::OnDisconnect(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) it->second.view.connected = false;
}

void GenerationRouter::OnHeartbeat(const std::string& worker_id,
                                   const gantry::v1::Heartbeat& heartbeat) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  WorkerView& v = it->second.view;
  v.loaded_models.clear();
  for (const gantry::v1::LoadedModel& m : heartbeat.loaded_models()) {
    v.loaded_models.insert(m.checkpoint_sha256());
  }
  v.reported_active_requests = heartbeat.generation_active_requests();
  v.reported_queued_showers = heartbeat.generation_queued_showers();
}

std::vector<GenerationRouter::Candidate> GenerationRouter::Candidates(
    const std::string& checkpoint_sha256, absl::Time now) const {
  // Sort key: reachable first, model loaded first, then the load (see the header), then the name.
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int32_t, std::string>;
  std::vector<std::pair<Key, Candidate>> ranked;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, w] : workers_) {
    const WorkerView& v = w.view;
    if (!v.connected || v.endpoint.empty()) continue;
    Candidate c{id, v.name, v.endpoint, w.secret, v.loaded_models.count(checkpoint_sha256) > 0};
    Key key{now < w.unreachable_until,
            !c.has_model,
            v.dispatched_showers,
            v.dispatched_requests,
            v.reported_queued_showers,
            v.reported_active_requests,
            v.name};
    ranked.emplace_back(std::move(key), std::move(c));
  }
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Candidate> out;
  out.reserve(ranked.size());
  for (auto& [key, c] : ranked) out.push_back(std::move(c));
  return out;
}

void GenerationRouter::Begin(const std::string& worker_id, const std::string& checkpoint_sha256,
                             int64_t showers) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  WorkerView& v = it->second.view;
  ++v.dispatched_requests;
  v.dispatched_showers += showers;
  // The worker loads the model for this call; until its next heartbeat says otherwise the next
  // call for the same model should go there too.
  v.loaded_models.insert(checkpoint_sha256);
}

void GenerationRouter::Received(const std::string& worker_id, int64_t showers) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  it->second.view.dispatched_showers =
      std::max<int64_t>(0, it->second.view.dispatched_showers - showers);
}

void GenerationRouter::End(const std::string& worker_id, int64_t showers_left) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  WorkerView& v = it->second.view;
  v.dispatched_requests = std::max<int64_t>(0, v.dispatched_requests - 1);
  v.dispatched_showers = std::max<int64_t>(0, v.dispatched_showers - showers_left);
}

void GenerationRouter::MarkUnreachable(const std::string& worker_id, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) it->second.unreachable_until = now + kUnreachablePenalty;
}

void GenerationRouter::MarkReachable(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) it->second.unreachable_until = absl::InfinitePast();
}

int GenerationRouter::ServingWorkers() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [id, w] : workers_) n += w.view.connected && !w.view.endpoint.empty();
  return n;
}

std::vector<GenerationRouter::WorkerView> GenerationRouter::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerView> out;
  for (const auto& [id, w] : workers_) out.push_back(w.view);
  return out;
}

}  // namespace gantry::scheduler
