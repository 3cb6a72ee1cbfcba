// OutboundQueue: the bounded FIFO of WorkerMessages waiting for the Connect stream (filled by rank
// reader threads, drained by the stream writer; it survives disconnects). When full it drops the
// oldest Progress first, then the oldest LogLine; RankStatus and JobResult are never dropped (the
// queue grows past its bound rather than lose them). Not thread-safe: the owner locks.
#ifndef GANTRY_WORKERS_AGENT_OUTBOUND_QUEUE_H_
#define GANTRY_WORKERS_AGENT_OUTBOUND_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>

#include "gantry/v1/worker.pb.h"

namespace gantry::agent {

class OutboundQueue {
 public:
  explicit OutboundQueue(size_t capacity = 10000) : capacity_(capacity) {}

  void Push(gantry::v1::WorkerMessage message);
  bool empty() const { return queue_.empty(); }
  size_t size() const { return queue_.size(); }
  // The oldest message; the queue must not be empty.
  const gantry::v1::WorkerMessage& front() const { return queue_.front(); }
  void PopFront() { queue_.pop_front(); }
  // Messages dropped so far because the queue was full.
  int64_t dropped() const { return dropped_; }

 private:
  // Drops the oldest message of `kind`; false when there is none.
  bool DropOldest(gantry::v1::WorkerMessage::KindCase kind);

  size_t capacity_;
  std::deque<gantry::v1::WorkerMessage> queue_;
  int64_t dropped_ = 0;
};

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_OUTBOUND_QUEUE_H_
