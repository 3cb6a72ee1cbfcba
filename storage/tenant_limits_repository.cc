#include "storage/tenant_limits_repository.h"

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "storage/transaction.h"

namespace gantry::storage {

namespace {

std::optional<int64_t> Nullable(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<int64_t>();
}

absl::Status TenantNotFound(const std::string& tenant) {
  return absl::NotFoundError(absl::StrCat("tenant \"", tenant, "\" does not exist"));
}

}  // namespace

absl::StatusOr<TenantLimits::Overrides> TenantLimitsRepository::Get(const std::string& tenant) {
  TenantLimits::Overrides o;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    o = {};
    pqxx::result r =
        tx.Exec("tenant_limits_get",
                "SELECT l.max_dataset_bytes, l.max_concurrent_jobs, l.max_generation_streams, "
                "l.max_showers_per_minute, l.fair_share_weight, l.max_streams, "
                "l.max_showers_per_request, l.max_study_jobs FROM tenants t "
                "LEFT JOIN tenant_limits l ON l.tenant = t.name WHERE t.name = $1",
                tenant);
    if (r.empty()) return TenantNotFound(tenant);
    o.max_dataset_bytes = Nullable(r[0][0]);
    o.max_concurrent_jobs = Nullable(r[0][1]);
    o.max_generation_streams = Nullable(r[0][2]);
    o.max_showers_per_minute = Nullable(r[0][3]);
    if (!r[0][4].is_null()) o.fair_share_weight = r[0][4].as<double>();
    o.max_streams = Nullable(r[0][5]);
    o.max_showers_per_request = Nullable(r[0][6]);
    o.max_study_jobs = Nullable(r[0][7]);
    pqxx::result quotas =
        tx.Exec("tenant_pool_quotas_get",
                "SELECT pool, max_slots FROM tenant_pool_quotas WHERE tenant = $1", tenant);
    for (const auto& row : quotas)
      o.max_slots_per_pool[row[0].as<std::string>()] = row[1].as<int64_t>();
    return absl::OkStatus();
  }));
  return o;
}

absl::Status TenantLimitsRepository::Set(const std::string& tenant,
                                         const TenantLimits::Overrides& o) {
  for (const auto& [value, name] : {std::pair{o.max_dataset_bytes, "max_dataset_bytes"},
                                    std::pair{o.max_concurrent_jobs, "max_concurrent_jobs"},
                                    std::pair{o.max_generation_streams, "max_generation_streams"},
                                    std::pair{o.max_showers_per_minute, "max_showers_per_minute"},
                                    std::pair{o.max_streams, "max_streams"},
                                    std::pair{o.max_showers_per_request, "max_showers_per_request"},
                                    std::pair{o.max_study_jobs, "max_study_jobs"}}) {
    if (value && *value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("overrides.", name, ": ", *value, " is negative; give 0 for unlimited"));
    }
  }
  if (o.fair_share_weight &&
      !(*o.fair_share_weight > 0 && *o.fair_share_weight <= kMaxFairShareWeight)) {
    return absl::InvalidArgumentError(
        absl::StrCat("overrides.fair_share_weight: ", *o.fair_share_weight,
                     " is not a weight; give a number above 0 and at most 1e6 (default 1)"));
  }
  for (const auto& [pool, slots] : o.max_slots_per_pool) {
    if (pool.empty()) {
      return absl::InvalidArgumentError(
          "overrides.max_slots_per_pool: a quota needs a pool name; give pool=slots");
    }
    if (slots < 0 || slots > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("overrides.max_slots_per_pool[", pool, "]: ", slots,
                       " is not a slot count; give 0 (no quota) up to 2147483647"));
    }
  }
  for (const auto& [value, name] :
       {std::pair{o.max_concurrent_jobs, "max_concurrent_jobs"},
        std::pair{o.max_generation_streams, "max_generation_streams"},
        std::pair{o.max_streams, "max_streams"}, std::pair{o.max_study_jobs, "max_study_jobs"}}) {
    if (value.value_or(0) > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat("overrides.", name, ": ", *value,
                                                     " is too large; give at most ", INT32_MAX,
                                                     " (0 = unlimited)"));
    }
  }
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result t = tx.Exec("tenant_exists", "SELECT 1 FROM tenants WHERE name = $1", tenant);
    if (t.empty()) return TenantNotFound(tenant);
    tx.Exec("tenant_limits_set",
            "INSERT INTO tenant_limits (tenant, max_dataset_bytes, max_concurrent_jobs, "
            "max_generation_streams, max_showers_per_minute, fair_share_weight, max_streams, "
            "max_showers_per_request, max_study_jobs) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
            "ON CONFLICT (tenant) DO UPDATE SET max_dataset_bytes = EXCLUDED.max_dataset_bytes, "
            "max_concurrent_jobs = EXCLUDED.max_concurrent_jobs, "
            "max_generation_streams = EXCLUDED.max_generation_streams, "
            "max_showers_per_minute = EXCLUDED.max_showers_per_minute, "
            "fair_share_weight = EXCLUDED.fair_share_weight, max_streams = EXCLUDED.max_streams, "
            "max_showers_per_request = EXCLUDED.max_showers_per_request, "
            "max_study_jobs = EXCLUDED.max_study_jobs, updated_at = now()",
            tenant, o.max_dataset_bytes, o.max_concurrent_jobs, o.max_generation_streams,
            o.max_showers_per_minute, o.fair_share_weight, o.max_streams, o.max_showers_per_request,
            o.max_study_jobs);
    tx.Exec("tenant_pool_quotas_clear", "DELETE FROM tenant_pool_quotas WHERE tenant = $1", tenant);
    for (const auto& [pool, slots] : o.max_slots_per_pool) {
      tx.Exec("tenant_pool_quotas_set",
              "INSERT INTO tenant_pool_quotas (tenant, pool, max_slots) VALUES ($1, $2, $3)",
              tenant, pool, static_cast<int>(slots));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::map<std::string, TenantLimits::Overrides>>
TenantLimitsRepository::SchedulingOverrides() {
  std::map<std::string, TenantLimits::Overrides> all;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    all.clear();
    pqxx::result weights = tx.Exec("tenant_weights_all",
                                   "SELECT tenant, fair_share_weight FROM tenant_limits "
                                   "WHERE fair_share_weight IS NOT NULL");
    for (const auto& row : weights) {
      all[row[0].as<std::string>()].fair_share_weight = row[1].as<double>();
    }
    pqxx::result quotas =
        tx.Exec("tenant_pool_quotas_all", "SELECT tenant, pool, max_slots FROM tenant_pool_quotas");
    for (const auto& row : quotas) {
      all[row[0].as<std::string>()].max_slots_per_pool[row[1].as<std::string>()] =
          row[2].as<int64_t>();
    }
    return absl::OkStatus();
  }));
  return all;
}

absl::StatusOr<int64_t> TenantLimitsRepository::DatasetBytes(const std::string& tenant) {
  int64_t bytes = 0;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("tenant_dataset_bytes",
                             "SELECT COALESCE(sum(size_bytes), 0)::bigint FROM datasets "
                             "WHERE owner = $1",
                             tenant);
    bytes = r[0][0].as<int64_t>();
    return absl::OkStatus();
  }));
  return bytes;
}

absl::StatusOr<int64_t> TenantLimitsRepository::ActiveJobs(const std::string& tenant) {
  int64_t jobs = 0;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "tenant_active_jobs",
        "SELECT count(*) FROM jobs WHERE owner = $1 AND state IN "
        "('JOB_STATE_QUEUED', 'JOB_STATE_PLACING', 'JOB_STATE_RUNNING', 'JOB_STATE_RESTARTING')",
        tenant);
    jobs = r[0][0].as<int64_t>();
    return absl::OkStatus();
  }));
  return jobs;
}

}  // namespace gantry::storage
