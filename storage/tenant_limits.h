// TenantLimits: the per-tenant resource limits a server enforces (0 = unlimited).
#ifndef GANTRY_STORAGE_TENANT_LIMITS_H_
#define GANTRY_STORAGE_TENANT_LIMITS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace gantry::storage {

// A plain value; the server's defaults come from flags, a tenant's overrides from PostgreSQL
// (TenantLimitsRepository). Every count: 0 = unlimited. The initial values are the safe defaults
// a server has when no flag changes them (docs/ARCHITECTURE.md, "Quotas and limits"): a single
// tenant can neither fill the disk, the queue or the generation workers nor hold every thread.
struct TenantLimits {
  int64_t max_dataset_bytes = int64_t{256} << 30;  // sum of size_bytes of the tenant's datasets
  int64_t max_concurrent_jobs = 64;                // jobs QUEUED, PLACING, RUNNING or RESTARTING
  int64_t max_generation_streams = 32;             // concurrent Generate calls (per server)
  int64_t max_showers_per_minute =
      1000000;                   // token bucket refilled at this rate, holding one minute
  double fair_share_weight = 1;  // the scheduler's fair share: slots held / weight
  std::map<std::string, int64_t> max_slots_per_pool;  // pool -> slots held at once (0 = no quota)
  // Long-lived calls held at once on one server: WatchJob, WatchStudy, ReadDataset, UploadDataset,
  // Generate, ExportModel.
  int64_t max_streams = 64;
  int64_t max_showers_per_request = 100000;  // showers one Generate call may ask for
  int64_t max_study_jobs = 500;  // training jobs one study may run: budget.max_trials x folds

  // Each field of `overrides` that is set replaces the one of `*this`.
  struct Overrides {
    std::optional<int64_t> max_dataset_bytes;
    std::optional<int64_t> max_concurrent_jobs;
    std::optional<int64_t> max_generation_streams;
    std::optional<int64_t> max_showers_per_minute;
    std::optional<double> fair_share_weight;
    std::map<std::string, int64_t> max_slots_per_pool;  // pools given here replace the defaults'
    std::optional<int64_t> max_streams;
    std::optional<int64_t> max_showers_per_request;
    std::optional<int64_t> max_study_jobs;
  };
  TenantLimits With(const Overrides& overrides) const {
    TenantLimits l = *this;
    if (overrides.max_dataset_bytes) l.max_dataset_bytes = *overrides.max_dataset_bytes;
    if (overrides.max_concurrent_jobs) l.max_concurrent_jobs = *overrides.max_concurrent_jobs;
    if (overrides.max_generation_streams) {
      l.max_generation_streams = *overrides.max_generation_streams;
    }
    if (overrides.max_showers_per_minute) {
      l.max_showers_per_minute = *overrides.max_showers_per_minute;
    }
    if (overrides.fair_share_weight) l.fair_share_weight = *overrides.fair_share_weight;
    if (overrides.max_streams) l.max_streams = *overrides.max_streams;
    if (overrides.max_showers_per_request) {
      l.max_showers_per_request = *overrides.max_showers_per_request;
    }
    if (overrides.max_study_jobs) l.max_study_jobs = *overrides.max_study_jobs;
    for (const auto& [pool, slots] : overrides.max_slots_per_pool)
      l.max_slots_per_pool[pool] = slots;
    return l;
  }
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_TENANT_LIMITS_H_
