#include "server/platform/blob_collector.h"

#include <cstdio>

#include "base/log.h"

namespace gantry::server {

BlobCollector::BlobCollector(storage::BlobRepository& repository, storage::BlobStore& store,
                             absl::Duration interval, absl::Duration grace)
    : repository_(repository),
      store_(store),
      grace_(grace),
      task_(interval, [this] { CollectOnce(); }) {}

BlobCollector::~BlobCollector() { Stop(); }

void BlobCollector::CollectOnce() {
  absl::StatusOr<storage::BlobCollection> done = repository_.Collect(store_, grace_);
  if (!done.ok()) {
    GANTRY_LOG(ERROR) << "blob collection: " << done.status().ToString();
  } else if (done->deleted > 0 || done->temp_removed > 0) {
    GANTRY_LOG(INFO) << "blob collection deleted " << done->deleted << " unreferenced blobs and "
                     << done->temp_removed << " abandoned uploads";
  }
}

}  // namespace gantry::server
