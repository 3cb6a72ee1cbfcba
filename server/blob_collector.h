// BlobCollector: the server's garbage collector of unreferenced blobs, run on its own thread.
#ifndef GANTRY_SERVER_BLOB_COLLECTOR_H_
#define GANTRY_SERVER_BLOB_COLLECTOR_H_

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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

  void Start();
  // Ends the thread (waits for a pass under way). Idempotent.
  void Stop();

 private:
  void Run();

  storage::BlobRepository& repository_;
  storage::BlobStore& store_;
  const absl::Duration interval_;
  const absl::Duration grace_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_BLOB_COLLECTOR_H_
