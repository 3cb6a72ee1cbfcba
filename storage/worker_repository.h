// WorkerRepository: registered worker daemons, their capacity and liveness.
#ifndef GANTRY_STORAGE_WORKER_REPOSITORY_H_
#define GANTRY_STORAGE_WORKER_REPOSITORY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gantry/v1/admin.pb.h"
#include "gantry/v1/worker.pb.h"
#include "storage/database.h"

namespace gantry::storage {

// Thread-safe (stateless over a Database, which must outlive it).
class WorkerRepository {
 public:
  explicit WorkerRepository(Database& db) : db_(db) {}

  // Inserts or updates the worker named request.name() (INVALID_ARGUMENT when empty) and returns
  // its id "wrk-<uuid>", stable per name across re-registrations. Marks it connected, free_slots =
  // slots, last_heartbeat = now.
  absl::StatusOr<std::string> Upsert(const gantry::v1::RegisterRequest& request);

  // Records a heartbeat: free slots, the sha256 of cached datasets, time `now`; marks it connected.
  // NOT_FOUND for an unknown id.
  absl::Status Heartbeat(const std::string& id, int free_slots,
                         const std::vector<std::string>& cached_datasets, absl::Time now);

  absl::StatusOr<gantry::v1::WorkerInfo> Get(const std::string& id);
  // Drained by an operator (kept across registrations and server restarts). NOT_FOUND for an
  // unknown id.
  absl::Status SetDraining(const std::string& id, bool draining);

  // All workers, ordered by name.
  absl::StatusOr<std::vector<gantry::v1::WorkerInfo>> List();

  // The sha256 of datasets the worker last reported as cached.
  absl::StatusOr<std::vector<std::string>> CachedDatasets(const std::string& id);

  // NOT_FOUND for an unknown id.
  absl::Status MarkDisconnected(const std::string& id);

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_WORKER_REPOSITORY_H_
