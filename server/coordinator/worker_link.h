// WorkerLink: the outgoing half of one worker's Connect stream, a queue its writer drains.
#ifndef GANTRY_SERVER_COORDINATOR_WORKER_LINK_H_
#define GANTRY_SERVER_COORDINATOR_WORKER_LINK_H_

#include <deque>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gantry/v1/worker.pb.h"

namespace gantry::server {

// Thread-safe.
class WorkerLink {
 public:
  explicit WorkerLink(std::string worker_id) : worker_id_(std::move(worker_id)) {}
  const std::string& worker_id() const { return worker_id_; }

  // Queues a message; false once the link is closed.
  bool Send(gantry::v1::ServerMessage message);
  // The next message, waiting up to `timeout`; nullopt on timeout or once closed and drained.
  std::optional<gantry::v1::ServerMessage> Next(absl::Duration timeout);
  void Close();
  bool closed() const;

 private:
  const std::string worker_id_;
  mutable absl::Mutex mu_;
  std::deque<gantry::v1::ServerMessage> queue_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_WORKER_LINK_H_
