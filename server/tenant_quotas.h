// TenantQuotas: enforces the per-tenant limits (stored dataset bytes, active jobs, generation
// streams, showers per minute, long-lived calls, jobs per study).
#ifndef GANTRY_SERVER_TENANT_QUOTAS_H_
#define GANTRY_SERVER_TENANT_QUOTAS_H_

#include <cstdint>
#include <memory>
#include <string>

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
  // Releases what it holds (a stream) when destroyed; movable.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept : owner_(other.owner_), release_(std::move(other.release_)) {
      other.owner_ = nullptr;
    }
    Slot& operator=(Slot&&) = delete;
    ~Slot();

   private:
    friend class TenantQuotas;
    Slot(TenantQuotas* owner, std::string key) : owner_(owner), release_(std::move(key)) {}
    TenantQuotas* owner_ = nullptr;
    std::string release_;  // counter key
  };

  TenantQuotas(storage::TenantLimitsRepository& repository, storage::TenantLimits defaults,
               absl::Duration cache_ttl);

  absl::StatusOr<storage::TenantLimits> LimitsOf(const std::string& tenant);
  void Forget(const std::string& tenant);
  const storage::TenantLimits& defaults() const { return defaults_; }

  // Pre-check of an upload of `incoming` bytes (the exact check is DatasetRepository::Create).
  absl::Status CheckDatasetBytes(const std::string& tenant, int64_t incoming);
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
  void Release(const std::string& key);

  storage::TenantLimitsRepository& repository_;
  const storage::TenantLimits defaults_;
  const absl::Duration cache_ttl_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Cached> cache_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> in_use_ ABSL_GUARDED_BY(mu_);  // "kind/tenant"
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_TENANT_QUOTAS_H_
