// WorkerInbox: the intake of one Connect stream's job messages (rank status, progress, logs,
// results): stored in the order they arrived, acknowledged only once stored, kept and retried
// while the database is unavailable, and deduplicated by WorkerMessage.seq within one daemon
// incarnation (a daemon re-sends what was not acknowledged after every reconnect).
#ifndef GANTRY_SERVER_COORDINATOR_WORKER_INBOX_H_
#define GANTRY_SERVER_COORDINATOR_WORKER_INBOX_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "gantry/v1/worker.pb.h"
#include "server/coordinator/worker_registry.h"

namespace gantry::server {

// Not thread-safe: one per stream, used by the stream's reading thread only. Messages of one
// worker's different streams are serialised through the shared Delivery.
class WorkerInbox {
 public:
  // Stores one message; its status decides what happens to it:
  //   OK or a permanent error        -> done (acknowledged; the caller logs a permanent error)
  //   UNAVAILABLE, or any database call on this thread failed UNAVAILABLE meanwhile
  //                                  -> kept with every later message, retried by Retry()
  using Handler = std::function<absl::Status(const gantry::v1::WorkerMessage&)>;
  // Where the inbox reports dropped messages and the start and end of a database outage.
  using Logger = std::function<void(const std::string&)>;

  // `incarnation` is the stream's Hello.incarnation (0 = unknown: nothing is deduplicated).
  // At most `max_pending` messages of at most `max_pending_bytes` in all wait while the database
  // is unavailable.
  WorkerInbox(std::shared_ptr<WorkerRegistry::Delivery> delivery, uint64_t incarnation,
              Handler handler, Logger log, size_t max_pending = 20000,
              size_t max_pending_bytes = size_t{256} << 20);

  // Takes a job message and stores what can be stored, oldest first. RESOURCE_EXHAUSTED when it
  // would exceed max_pending or max_pending_bytes: the stream should end (the daemon re-sends after
  // reconnecting).
  absl::Status Receive(gantry::v1::WorkerMessage message);
  // Tries again to store the waiting messages (call it on every heartbeat).
  void Retry();

  // Every message of this incarnation with seq <= acked_seq() is stored (or was dropped for a
  // permanent reason); HeartbeatAck.acked_seq.
  uint64_t acked_seq() const;
  // Messages waiting for the database.
  size_t pending() const { return pending_.size(); }
  // True once after messages were stored or recognised as re-sent: an ack is due.
  bool TakeAckDue();

 private:
  void Drain();

  const std::shared_ptr<WorkerRegistry::Delivery> delivery_;
  const uint64_t incarnation_;
  const Handler handler_;
  const Logger log_;
  const size_t max_pending_;
  const size_t max_pending_bytes_;
  std::deque<gantry::v1::WorkerMessage> pending_;
  size_t pending_bytes_ = 0;
  uint64_t local_stored_seq_ = 0;  // acked_seq() when the incarnation is unknown
  bool ack_due_ = false;
  bool stalled_ = false;  // the database was unavailable at the last attempt
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_WORKER_INBOX_H_
