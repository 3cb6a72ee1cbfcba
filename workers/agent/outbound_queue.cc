#include "workers/agent/outbound_queue.h"

#include <algorithm>
#include <utility>

namespace gantry::agent {

namespace v1 = ::gantry::v1;

OutboundQueue::PushResult OutboundQueue::Push(v1::WorkerMessage message) {
  PushResult result;
  if (queue_.size() >= capacity_) {
    if (DropOldest(v1::WorkerMessage::kProgress)) {
      result.dropped = v1::WorkerMessage::kProgress;
    } else if (DropOldest(v1::WorkerMessage::kLog)) {
      result.dropped = v1::WorkerMessage::kLog;
    }
    if (result.dropped != v1::WorkerMessage::KIND_NOT_SET) ++dropped_;
  }
  result.seq = next_seq_++;
  message.set_seq(result.seq);
  queue_.push_back(std::move(message));
  return result;
}

const v1::WorkerMessage* OutboundQueue::NextUnsent() const {
  // Seqs increase along the deque: the first one past sent_through_.
  auto it =
      std::upper_bound(queue_.begin(), queue_.end(), sent_through_,
                       [](uint64_t seq, const v1::WorkerMessage& m) { return seq < m.seq(); });
  return it == queue_.end() ? nullptr : &*it;
}

void OutboundQueue::MarkSent(uint64_t seq) { sent_through_ = std::max(sent_through_, seq); }

size_t OutboundQueue::Ack(uint64_t acked_seq) {
  // An ack for more than was ever numbered (a confused server) acknowledges what exists.
  acked_seq = std::min(acked_seq, next_seq_ - 1);
  if (acked_seq <= acked_through_) return 0;
  acked_through_ = acked_seq;
  sent_through_ = std::max(sent_through_, acked_through_);
  size_t removed = 0;
  while (!queue_.empty() && queue_.front().seq() <= acked_through_) {
    queue_.pop_front();
    ++removed;
  }
  return removed;
}

std::set<std::string> OutboundQueue::jobs() const {
  std::set<std::string> jobs;
  for (const v1::WorkerMessage& m : queue_) {
    if (!m.job_id().empty()) jobs.insert(m.job_id());
  }
  return jobs;
}

bool OutboundQueue::DropOldest(v1::WorkerMessage::KindCase kind) {
  // Any held message may go, sent or not: dropping one written but not acknowledged only means it
  // is not re-sent. The writer works on a copy, so nothing here is in use.
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->kind_case() == kind) {
      queue_.erase(it);
      return true;
    }
  }
  return false;
}

}  // namespace gantry::agent
