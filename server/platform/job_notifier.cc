#include "server/platform/job_notifier.h"

#include <utility>

namespace gantry::server {

JobNotifier::Subscription::Subscription(JobNotifier& notifier, std::string job_id,
                                        std::function<void()> on_change)
    : notifier_(notifier), job_id_(std::move(job_id)) {
  absl::MutexLock lock(&notifier_.mu_);
  id_ = notifier_.next_id_++;
  notifier_.jobs_[job_id_].emplace(id_, std::move(on_change));
}

JobNotifier::Subscription::~Subscription() {
  absl::MutexLock lock(&notifier_.mu_);
  auto it = notifier_.jobs_.find(job_id_);
  if (it == notifier_.jobs_.end()) return;
  it->second.erase(id_);
  if (it->second.empty()) notifier_.jobs_.erase(it);
}

void JobNotifier::Notify(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  for (auto& [id, on_change] : it->second) on_change();
}

int JobNotifier::watched_jobs() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(jobs_.size());
}

}  // namespace gantry::server
