// WorkerRegistry: what this server process remembers of the workers that registered with it, so
// that the worker protocol keeps working while PostgreSQL is unavailable: each worker's id and
// registration (Register and Connect answered from memory; the row written again once the database
// is back) and how far its job messages were stored (the dedupe position WorkerInbox keeps).
#ifndef GANTRY_SERVER_COORDINATOR_WORKER_REGISTRY_H_
#define GANTRY_SERVER_COORDINATOR_WORKER_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "gantry/v1/admin.pb.h"
#include "gantry/v1/worker.pb.h"

namespace gantry::server {

// Thread-safe. Memory only: a restarted server starts empty (workers then register through the
// database as usual).
class WorkerRegistry {
 public:
  // How far one worker's job messages were stored, shared by its successive Connect streams. A
  // stream holds `mu` while it stores a message, so two streams of one worker (an old one still
  // closing, a new one re-sending) never apply the same message twice.
  struct Delivery {
    absl::Mutex mu;
    uint64_t incarnation ABSL_GUARDED_BY(mu) = 0;  // Hello.incarnation the position belongs to
    uint64_t stored_seq ABSL_GUARDED_BY(mu) = 0;   // every seq <= this was stored or dropped
  };

  // After the database stored a registration.
  void Remember(const std::string& worker_id, const gantry::v1::RegisterRequest& request);
  // Register while the database is unavailable: the id of a worker of that name this process
  // knows (the registration is kept and its row marked to be written again), else nullopt.
  std::optional<std::string> RegisterFromMemory(const gantry::v1::RegisterRequest& request);
  // What Connect needs of a worker (id, name, slots, ...) when the database cannot say.
  std::optional<gantry::v1::WorkerInfo> Find(const std::string& worker_id) const;

  // A registration answered from memory whose row is still to be written, with its version.
  struct StaleRow {
    gantry::v1::RegisterRequest request;
    int64_t version = 0;
  };
  std::optional<StaleRow> FindStaleRow(const std::string& worker_id) const;
  // The row of `version` was written (a newer registration meanwhile stays stale).
  void RowWritten(const std::string& worker_id, int64_t version);

  // The delivery position of a worker (created at the first call, kept for the process lifetime).
  std::shared_ptr<Delivery> DeliveryOf(const std::string& worker_id);

 private:
  struct Known {
    gantry::v1::RegisterRequest request;
    int64_t version = 0;
    bool stale = false;
  };

  mutable absl::Mutex mu_;
  std::map<std::string, Known> by_id_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> id_by_name_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Delivery>> deliveries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_WORKER_REGISTRY_H_
