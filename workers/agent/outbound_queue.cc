#include "workers/agent/outbound_queue.h"

#include <utility>

namespace gantry::agent {

void OutboundQueue::Push(gantry::v1::WorkerMessage message) {
  if (queue_.size() >= capacity_) {
    if (DropOldest(gantry::v1::WorkerMessage::kProgress) ||
        DropOldest(gantry::v1::WorkerMessage::kLog) ||
        DropOldest(gantry::v1::WorkerMessage::kHeartbeat)) {
      ++dropped_;
    }
  }
  queue_.push_back(std::move(message));
}

bool OutboundQueue::DropOldest(gantry::v1::WorkerMessage::KindCase kind) {
  // Never drop the head: the writer may be sending it right now.
  for (auto it = queue_.size() > 1 ? queue_.begin() + 1 : queue_.end(); it != queue_.end(); ++it) {
    if (it->kind_case() == kind) {
      queue_.erase(it);
      return true;
    }
  }
  return false;
}

}  // namespace gantry::agent
