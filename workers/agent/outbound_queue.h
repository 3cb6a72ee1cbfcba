// OutboundQueue: the bounded queue of job messages (rank status, progress, logs, results) a daemon
// owes the server, kept until the server acknowledges them (at-least-once delivery).
//
// Push numbers each message (WorkerMessage.seq, 1, 2, ... per queue, i.e. per daemon process). The
// stream writer takes NextUnsent() and calls MarkSent(); the server's HeartbeatAck.acked_seq
// removes what it stored (Ack). After a reconnect RewindUnacked() makes every message still held
// unsent again, so it is re-sent in order on the new stream.
//
// When full (size() >= capacity) Push drops the oldest Progress first, then the oldest LogLine;
// RankStatus and JobResult are never dropped (the queue grows past its bound rather than lose
// them). Heartbeats are not queued. Not thread-safe: the owner locks.
#ifndef GANTRY_WORKERS_AGENT_OUTBOUND_QUEUE_H_
#define GANTRY_WORKERS_AGENT_OUTBOUND_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>
#include <string>

#include "gantry/v1/worker.pb.h"

namespace gantry::agent {

class OutboundQueue {
 public:
  explicit OutboundQueue(size_t capacity = 10000) : capacity_(capacity) {}

  // What Push had to drop to stay within the bound.
  struct PushResult {
    uint64_t seq = 0;  // the number given to the pushed message
    gantry::v1::WorkerMessage::KindCase dropped = gantry::v1::WorkerMessage::KIND_NOT_SET;
  };
  // Queues `message` with the next seq (any seq it carries is replaced).
  PushResult Push(gantry::v1::WorkerMessage message);

  // The oldest message not yet written on the current stream; null when every held message was.
  const gantry::v1::WorkerMessage* NextUnsent() const;
  // The message numbered `seq` was written on the current stream.
  void MarkSent(uint64_t seq);
  // Forgets every message with seq <= acked_seq (the server stored it). Returns how many.
  size_t Ack(uint64_t acked_seq);
  // A new stream: every held message is to be sent again, oldest first.
  void RewindUnacked() { sent_through_ = acked_through_; }

  bool empty() const { return queue_.empty(); }
  // Messages held (sent or not, none acknowledged).
  size_t size() const { return queue_.size(); }
  size_t capacity() const { return capacity_; }
  // Messages dropped so far because the queue was full.
  int64_t dropped() const { return dropped_; }
  // The highest seq acknowledged so far.
  uint64_t acked_seq() const { return acked_through_; }
  // The jobs the held messages are about.
  std::set<std::string> jobs() const;

 private:
  // Drops the oldest message of `kind`; false when there is none.
  bool DropOldest(gantry::v1::WorkerMessage::KindCase kind);

  size_t capacity_;
  std::deque<gantry::v1::WorkerMessage> queue_;  // seq increasing front to back
  uint64_t next_seq_ = 1;
  uint64_t sent_through_ = 0;   // messages with seq <= this were written on the current stream
  uint64_t acked_through_ = 0;  // messages with seq <= this were acknowledged
  int64_t dropped_ = 0;
};

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_OUTBOUND_QUEUE_H_
