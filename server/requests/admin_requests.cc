#include "server/requests/admin_requests.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/safe_text.h"
#include "base/status_macros.h"

namespace gantry::server {

namespace v1 = ::gantry::v1;
using checks::CheckInt;
using checks::Invalid;

absl::Status ValidateLoadModel(const v1::LoadModelRequest& request) {
  RETURN_IF_ERROR(ParseModelRef(request.model(), "model").status());
  if (request.workers_size() > kMaxLoadWorkers) {
    return Invalid("workers", absl::StrCat("names ", request.workers_size(),
                                           " workers; name at most ", kMaxLoadWorkers));
  }
  std::set<std::string> seen;
  for (const std::string& w : request.workers()) {
    if (w.empty() || w.size() > 256) {
      return Invalid("workers", "give each worker's name or id (gantry admin workers)");
    }
    if (!seen.insert(w).second) {
      return Invalid("workers", absl::StrCat("names \"", BoundedField(w), "\" twice"));
    }
  }
  RETURN_IF_ERROR(CheckInt(request.worker_count(), 0, kMaxLoadWorkerCount, "worker_count"));
  if (request.worker_count() > 0 && request.workers_size() > 0) {
    return Invalid("worker_count", "give either workers or worker_count, not both");
  }
  const v1::BatchingSettings& b = request.batching();
  if (b.has_max_batch_size()) {
    RETURN_IF_ERROR(CheckInt(b.max_batch_size(), 1, 4096, "batching.max_batch_size"));
  }
  if (b.has_max_queue_delay_ms()) {
    RETURN_IF_ERROR(CheckInt(b.max_queue_delay_ms(), 0, 10000, "batching.max_queue_delay_ms"));
  }
  if (b.has_max_queued_requests()) {
    RETURN_IF_ERROR(CheckInt(b.max_queued_requests(), 1, 1000000, "batching.max_queued_requests"));
  }
  if (b.has_priority_levels()) {
    RETURN_IF_ERROR(
        CheckInt(b.priority_levels(), 1, kMaxPriorityLevels, "batching.priority_levels"));
  }
  return absl::OkStatus();
}

absl::Status ValidateUnloadModel(const v1::UnloadModelRequest& request) {
  return ParseModelRef(request.model(), "model").status();
}

}  // namespace gantry::server
