#include "server/blob_collector.h"

#include <cstdio>

#include "base/log.h"

namespace gantry::server {

BlobCollector::BlobCollector(storage::BlobRepository& repository, storage::BlobStore& store,
                             absl::Duration interval, absl::Duration grace)
    : repository_(repository), store_(store), interval_(interval), grace_(grace) {}

BlobCollector::~BlobCollector() { Stop(); }

void BlobCollector::Start() {
  if (interval_ <= absl::ZeroDuration() || thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void BlobCollector::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void BlobCollector::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Condition stopping(&stopping_);
      if (mu_.AwaitWithTimeout(stopping, interval_)) return;
    }
    absl::StatusOr<storage::BlobCollection> done = repository_.Collect(store_, grace_);
    if (!done.ok()) {
      GANTRY_LOG(ERROR) << "blob collection: " << done.status().ToString();
    } else if (done->deleted > 0 || done->temp_removed > 0) {
      GANTRY_LOG(INFO) << "blob collection deleted " << done->deleted << " unreferenced blobs and "
                       << done->temp_removed << " abandoned uploads";
    }
  }
}

}  // namespace gantry::server
