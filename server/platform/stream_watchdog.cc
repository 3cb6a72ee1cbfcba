#include "server/platform/stream_watchdog.h"

#include <utility>

#include "absl/time/clock.h"
#include "base/log.h"
#include "grpc/grpc.h"

namespace gantry::server {

StreamWatchdog::StreamWatchdog(absl::Duration tick)
    : task_(tick, [this] {
        absl::MutexLock lock(&mu_);
        CancelExpired(absl::Now());
      }) {}

StreamWatchdog::~StreamWatchdog() { Stop(); }

StreamWatchdog::Watch StreamWatchdog::Begin(grpc::ServerContextBase& context) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{&context});
  return Watch(this, id);
}

int64_t StreamWatchdog::watched() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(entries_.size());
}

StreamWatchdog::Watch::~Watch() {
  if (owner_ == nullptr) return;
  absl::MutexLock lock(&owner_->mu_);
  owner_->entries_.erase(id_);
}

void StreamWatchdog::Watch::Arm(absl::Duration limit, std::string message) {
  const absl::Time deadline = absl::Now() + limit;
  absl::MutexLock lock(&owner_->mu_);
  Entry& e = owner_->entries_.at(id_);
  if (e.fired) return;
  e.deadline = deadline;
  e.message = std::move(message);
}

void StreamWatchdog::Watch::Disarm() {
  absl::MutexLock lock(&owner_->mu_);
  owner_->entries_.at(id_).deadline = absl::InfiniteFuture();
}

absl::Status StreamWatchdog::Watch::status() const {
  absl::MutexLock lock(&owner_->mu_);
  const Entry& e = owner_->entries_.at(id_);
  return e.fired ? absl::DeadlineExceededError(e.message) : absl::OkStatus();
}

void StreamWatchdog::CancelExpired(absl::Time now) {
  for (auto& [id, e] : entries_) {
    if (e.fired || e.deadline > now) continue;
    e.fired = true;
    GANTRY_LOG(INFO) << "ending a client stream from " << e.context->peer() << ": " << e.message;
    // Sends the status to the client (unlike TryCancel's CANCELLED) and ends the pending Read.
    grpc_call_cancel_with_status(e.context->c_call(), GRPC_STATUS_DEADLINE_EXCEEDED,
                                 e.message.c_str(), nullptr);
  }
}

}  // namespace gantry::server
