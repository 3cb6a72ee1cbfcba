#include "server/platform/job_notifier.h"

#include <utility>

namespace gantry::server {

JobNotifier::Subscription::Subscription(JobNotifier& notifier, std::string job_id)
    : notifier_(notifier), job_id_(std::move(job_id)) {
  absl::MutexLock lock(&notifier_.mu_);
  Entry& e = notifier_.jobs_[job_id_];
  ++e.watchers;
  seen_ = e.version + notifier_.all_version_;
}

JobNotifier::Subscription::~Subscription() {
  absl::MutexLock lock(&notifier_.mu_);
  auto it = notifier_.jobs_.find(job_id_);
  if (it != notifier_.jobs_.end() && --it->second.watchers <= 0) notifier_.jobs_.erase(it);
}

bool JobNotifier::Subscription::Wait(absl::Duration timeout) {
  absl::MutexLock lock(&notifier_.mu_);
  // The sum of the job's and the global counter only grows, so any Notify changes it.
  auto changed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(notifier_.mu_) {
    auto it = notifier_.jobs_.find(job_id_);
    const uint64_t now =
        (it == notifier_.jobs_.end() ? 0 : it->second.version) + notifier_.all_version_;
    return now != seen_;
  };
  const bool notified = notifier_.mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
  auto it = notifier_.jobs_.find(job_id_);
  seen_ = (it == notifier_.jobs_.end() ? 0 : it->second.version) + notifier_.all_version_;
  return notified;
}

void JobNotifier::Notify(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) ++it->second.version;
}

void JobNotifier::NotifyAll() {
  absl::MutexLock lock(&mu_);
  ++all_version_;
}

}  // namespace gantry::server
