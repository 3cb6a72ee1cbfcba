#include "server/coordinator/worker_inbox.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/safe_text.h"
#include "storage/database.h"

namespace gantry::server {

namespace v1 = ::gantry::v1;

WorkerInbox::WorkerInbox(std::shared_ptr<WorkerRegistry::Delivery> delivery, uint64_t incarnation,
                         Handler handler, Logger log, size_t max_pending, size_t max_pending_bytes)
    : delivery_(std::move(delivery)),
      incarnation_(incarnation),
      handler_(std::move(handler)),
      log_(std::move(log)),
      max_pending_(std::max<size_t>(1, max_pending)),
      max_pending_bytes_(max_pending_bytes) {
  if (incarnation_ == 0) return;
  absl::MutexLock lock(&delivery_->mu);
  if (delivery_->incarnation != incarnation_) {
    // A new daemon process: its seqs start again from 1.
    delivery_->incarnation = incarnation_;
    delivery_->stored_seq = 0;
  }
}

absl::Status WorkerInbox::Receive(v1::WorkerMessage message) {
  const size_t bytes = message.ByteSizeLong();
  if (!pending_.empty() &&
      (pending_.size() >= max_pending_ || pending_bytes_ + bytes > max_pending_bytes_)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(pending_.size(), " job messages (", pending_bytes_,
                     " bytes) are waiting for the database; reconnect to send them again"));
  }
  pending_bytes_ += bytes;
  pending_.push_back(std::move(message));
  // While the database is out, new messages only queue up: Retry() probes it.
  if (!stalled_) Drain();
  return absl::OkStatus();
}

void WorkerInbox::Retry() {
  if (!pending_.empty()) Drain();
}

uint64_t WorkerInbox::acked_seq() const {
  if (incarnation_ != 0) {
    absl::MutexLock lock(&delivery_->mu);
    if (delivery_->incarnation == incarnation_) return delivery_->stored_seq;
  }
  return local_stored_seq_;
}

bool WorkerInbox::TakeAckDue() { return std::exchange(ack_due_, false); }

void WorkerInbox::Drain() {
  while (!pending_.empty()) {
    const v1::WorkerMessage& m = pending_.front();
    const uint64_t seq = m.seq();
    absl::Status status;
    bool unavailable = false;
    bool duplicate = false;
    {
      absl::MutexLock lock(&delivery_->mu);
      const bool dedupe = incarnation_ != 0 && seq != 0 && delivery_->incarnation == incarnation_;
      if (dedupe && seq <= delivery_->stored_seq) {
        duplicate = true;  // stored before (a re-send, or a seq going backwards): ack again
      } else {
        const int64_t failures_before = storage::Database::UnavailableOnThisThread();
        status = handler_(m);
        // Parts of the handling log database errors and go on; any of them makes it a retry.
        unavailable = absl::IsUnavailable(status) ||
                      storage::Database::UnavailableOnThisThread() != failures_before;
        if (!unavailable && dedupe) delivery_->stored_seq = seq;
      }
    }
    if (unavailable) {
      if (!stalled_) {
        log_(absl::StrCat("the database is unavailable",
                          status.ok() ? "" : absl::StrCat(" (", status.message(), ")"),
                          "; keeping ", pending_.size(),
                          " job message(s) and every later one until it is back"));
      }
      stalled_ = true;
      return;
    }
    if (stalled_) {
      log_(absl::StrCat("the database is back; storing ", pending_.size(),
                        " waiting job message(s)"));
      stalled_ = false;
    }
    if (!duplicate && !status.ok()) {
      log_(absl::StrCat("dropped a message (seq ", seq, ", job ", BoundedField(m.job_id()),
                        "): ", BoundedField(status.ToString(), 512)));
    }
    if (seq != 0) local_stored_seq_ = std::max(local_stored_seq_, seq);
    pending_bytes_ -= std::min(pending_bytes_, m.ByteSizeLong());
    pending_.pop_front();
    ack_due_ = true;
  }
}

}  // namespace gantry::server
