// TenantQuotas: enforces the per-tenant limits (stored dataset bytes, active jobs, generation
// streams, showers per minute, long-lived calls, jobs per study).
#ifndef GANTRY_SERVER_PLATFORM_TENANT_QUOTAS_H_
#define GANTRY_SERVER_PLATFORM_TENANT_QUOTAS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/tenant_limits.h"
#include "storage/tenant_limits_repository.h"

namespace gantry::server {

// Thread-safe. A tenant's limits are the server's defaults with its stored overrides applied,
// cached for `cache_ttl` (Forget drops one at once, after SetTenantLimits through this server).
// Exceeding a limit is RESOURCE_EXHAUSTED with a message naming the limit, its value and the
// current use. Stored bytes and active jobs are checked in PostgreSQL (exact across servers);
// streams and the shower rate are counted in this process (per server).
class TenantQuotas {
 public:
  // Releases what it holds (a stream, or bytes of an upload) when destroyed; movable.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept
        : owner_(other.owner_), release_(std::move(other.release_)), amount_(other.amount_) {
      other.owner_ = nullptr;
    }
    Slot& operator=(Slot&&) = delete;
    ~Slot();

   private:
    friend class TenantQuotas;
    Slot(TenantQuotas* owner, std::string key, int64_t amount = 1)
        : owner_(owner), release_(std::move(key)), amount_(amount) {}
    TenantQuotas* owner_ = nullptr;
    std::string release_;  // counter key
    int64_t amount_ = 1;   // what it adds to the counter
  };

  TenantQuotas(storage::TenantLimitsRepository& repository, storage::TenantLimits defaults,
               absl::Duration cache_ttl);

  absl::StatusOr<storage::TenantLimits> LimitsOf(const std::string& tenant);
  void Forget(const std::string& tenant);
  const storage::TenantLimits& defaults() const { return defaults_; }

  // Reserves `incoming` bytes of an upload for as long as the slot lives: RESOURCE_EXHAUSTED when
  // the tenant's stored bytes, its uploads under way and its recently refused uploads (below) on
  // this server, plus `incoming`, pass max_dataset_bytes. A pre-check: the exact check of stored
  // bytes is DatasetRepository::Create.
  absl::StatusOr<Slot> ReserveUploadBytes(const std::string& tenant, int64_t incoming);
  // A refused upload's blob stays on disk until the blob collector removes it: its bytes count
  // against the tenant's uploads until `until` (the collector's grace).
  void HoldRefusedBytes(const std::string& tenant, int64_t bytes, absl::Time until);
  // One more Generate call; RESOURCE_EXHAUSTED past max_generation_streams.
  absl::StatusOr<Slot> AcquireGenerationStream(const std::string& tenant);
  // One more long-lived call (WatchJob, WatchStudy, ReadDataset, UploadDataset, Generate,
  // ExportModel); RESOURCE_EXHAUSTED past max_streams.
  absl::StatusOr<Slot> AcquireStream(const std::string& tenant);
  // A study of `max_trials` trials of `folds` folds each (0 or 1: no cross-validation) runs up to
  // max_trials x folds training jobs; RESOURCE_EXHAUSTED past max_study_jobs.
  absl::Status CheckStudyJobs(const std::string& tenant, int64_t max_trials, int64_t folds);
  // Takes `showers` from the tenant's token bucket (max_showers_per_minute, refilled
  // continuously, holding at most one minute's worth); all or nothing.
  absl::Status TakeShowers(const std::string& tenant, int64_t showers);
  // Puts back showers taken for a call that did not deliver them (capped at one minute's worth).
  void ReturnShowers(const std::string& tenant, int64_t showers);

 private:
  struct Cached {
    storage::TenantLimits limits;
    absl::Time expires;
  };
  struct Bucket {
    double tokens = 0;
    absl::Time updated;
  };
  absl::StatusOr<Slot> Acquire(const std::string& key, const std::string& tenant, int64_t limit,
                               const char* limit_name, const char* what);
  void Release(const std::string& key, int64_t amount);
  // Bytes of uploads under way and of unexpired refused ones (dropping the expired).
  int64_t PendingBytesLocked(const std::string& tenant, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  storage::TenantLimitsRepository& repository_;
  const storage::TenantLimits defaults_;
  const absl::Duration cache_ttl_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Cached> cache_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> in_use_ ABSL_GUARDED_BY(mu_);  // "kind/tenant"
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  struct Refused {
    int64_t bytes;
    absl::Time until;
  };
  absl::flat_hash_map<std::string, std::vector<Refused>> refused_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_TENANT_QUOTAS_H_
