// TenantLimitsRepository: per-tenant limit overrides and the usage the limits are checked against.
#ifndef GANTRY_STORAGE_TENANT_LIMITS_REPOSITORY_H_
#define GANTRY_STORAGE_TENANT_LIMITS_REPOSITORY_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/database.h"
#include "storage/tenant_limits.h"

namespace gantry::storage {

// Thread-safe (stateless over a Database, which must outlive it).
class TenantLimitsRepository {
 public:
  explicit TenantLimitsRepository(Database& db) : db_(db) {}

  // The tenant's stored overrides (all unset when none were stored). NOT_FOUND for an unknown
  // tenant.
  absl::StatusOr<TenantLimits::Overrides> Get(const std::string& tenant);

  // Replaces the tenant's overrides (unset fields: the server's default; the pool quotas as a
  // whole). Counts must be >= 0, the weight in (0, 1e6], quota pools named (INVALID_ARGUMENT
  // otherwise; whether the pools exist is the caller's check); NOT_FOUND for an unknown tenant.
  absl::Status Set(const std::string& tenant, const TenantLimits::Overrides& overrides);

  // Every tenant's scheduling overrides (fair_share_weight and max_slots_per_pool only), for the
  // tenants that have any.
  absl::StatusOr<std::map<std::string, TenantLimits::Overrides>> SchedulingOverrides();

  static constexpr double kMaxFairShareWeight = 1e6;

  // Bytes of the tenant's stored datasets.
  absl::StatusOr<int64_t> DatasetBytes(const std::string& tenant);
  // The tenant's jobs in QUEUED, PLACING, RUNNING or RESTARTING.
  absl::StatusOr<int64_t> ActiveJobs(const std::string& tenant);

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_TENANT_LIMITS_REPOSITORY_H_
