#include "server/platform/stream_pump.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace gantry::server {

StreamPump::StreamPump(int threads) {
  if (threads < 1) threads = 1;
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

StreamPump::~StreamPump() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

StreamPump::Id StreamPump::RunAt(absl::Time when, std::function<void()> step) {
  absl::MutexLock lock(&mu_);
  const Id id = next_id_++;
  queue_.emplace(std::make_pair(when, id), std::move(step));
  due_.emplace(id, when);
  return id;
}

void StreamPump::Wake(Id id) {
  absl::MutexLock lock(&mu_);
  auto it = due_.find(id);
  if (it == due_.end()) return;
  const absl::Time now = absl::Now();
  if (it->second <= now) return;
  auto entry = queue_.extract(std::make_pair(it->second, id));
  entry.key() = std::make_pair(now, id);
  queue_.insert(std::move(entry));
  it->second = now;
}

void StreamPump::WakeAll() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  std::map<std::pair<absl::Time, Id>, std::function<void()>> woken;
  for (auto& [key, step] : queue_) {
    const absl::Time when = std::min(key.first, now);
    woken.emplace(std::make_pair(when, key.second), std::move(step));
    due_[key.second] = when;
  }
  queue_ = std::move(woken);
}

int StreamPump::waiting() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

void StreamPump::Loop() {
  while (true) {
    std::function<void()> step;
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        if (stopping_) return;
        const absl::Time now = absl::Now();
        const std::pair<absl::Time, Id> head =
            queue_.empty() ? std::make_pair(absl::InfiniteFuture(), Id{0}) : queue_.begin()->first;
        if (head.first <= now) break;
        // Wakes at the head's time, or earlier for a new or woken step (either changes the head).
        auto changed = [this, head]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || (!queue_.empty() && queue_.begin()->first != head);
        };
        mu_.AwaitWithDeadline(absl::Condition(&changed), head.first);
      }
      auto first = queue_.begin();
      due_.erase(first->first.second);
      step = std::move(first->second);
      queue_.erase(first);
    }
    step();
  }
}

}  // namespace gantry::server
