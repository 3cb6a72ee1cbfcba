// BlobCollector: the server's garbage collector of unreferenced blobs, run on its own thread.
#ifndef GANTRY_SERVER_PLATFORM_BLOB_COLLECTOR_H_
#define GANTRY_SERVER_PLATFORM_BLOB_COLLECTOR_H_

#include "absl/time/time.h"
#include "base/periodic_task.h"
#include "storage/blob_repository.h"
#include "storage/blob_store.h"

namespace gantry::server {

// Thread-safe. Every `interval` runs storage::BlobRepository::Collect with `grace` (blobs with no
// reference for longer than `grace` are deleted; see BlobRepository for why that is safe against
// concurrent uploads). Errors (the database down) are logged and the next pass tries again.
// `repository` and `store` must outlive it. An interval <= 0 never starts the thread.
class BlobCollector {
 public:
  BlobCollector(storage::BlobRepository& repository, storage::BlobStore& store,
                absl::Duration interval, absl::Duration grace);
  ~BlobCollector();  // Stop()
  BlobCollector(const BlobCollector&) = delete;
  BlobCollector& operator=(const BlobCollector&) = delete;

  void Start() { task_.Start(); }
  // Ends the thread (waits for a pass under way). Idempotent.
  void Stop() { task_.Stop(); }

 private:
  void CollectOnce();

  storage::BlobRepository& repository_;
  storage::BlobStore& store_;
  const absl::Duration grace_;
  PeriodicTask task_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_BLOB_COLLECTOR_H_
