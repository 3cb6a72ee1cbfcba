#include "base/periodic_task.h"

#include <utility>

namespace gantry {

PeriodicTask::PeriodicTask(absl::Duration interval, std::function<void()> tick)
    : interval_(interval), tick_(std::move(tick)) {}

PeriodicTask::~PeriodicTask() { Stop(); }

void PeriodicTask::Start() {
  if (interval_ <= absl::ZeroDuration() || thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
    woken_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void PeriodicTask::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void PeriodicTask::Wake() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
}

bool PeriodicTask::running() const { return thread_.joinable(); }

void PeriodicTask::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || woken_; };
      mu_.AwaitWithTimeout(absl::Condition(&ready), interval_);
      if (stopping_) return;
      woken_ = false;
    }
    tick_();
  }
}

}  // namespace gantry
