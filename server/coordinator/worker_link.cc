#include "server/coordinator/worker_link.h"

#include <utility>

namespace gantry::server {

namespace v1 = ::gantry::v1;

bool WorkerLink::Send(v1::ServerMessage message) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  queue_.push_back(std::move(message));
  return true;
}

std::optional<v1::ServerMessage> WorkerLink::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return closed_ || !queue_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (queue_.empty()) return std::nullopt;
  v1::ServerMessage m = std::move(queue_.front());
  queue_.pop_front();
  return m;
}

void WorkerLink::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool WorkerLink::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

}  // namespace gantry::server
