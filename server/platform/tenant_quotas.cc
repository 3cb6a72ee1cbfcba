#include "server/platform/tenant_quotas.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_details.h"
#include "base/status_macros.h"

namespace gantry::server {

namespace {

// The in_use_ entry of a tenant's upload bytes under way.
std::string UploadBytesKey(const std::string& tenant) { return absl::StrCat("bytes/", tenant); }

// How to raise a limit: per tenant with the CLI (AdminService.SetTenantLimits).
std::string Raise(absl::string_view tenant, absl::string_view limit_name) {
  std::string flag(limit_name);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return absl::StrCat("ask an admin to raise the limit (gantry admin tenants limits set ", tenant,
                      " --", flag, " N)");
}

// The ErrorInfo of every quota refusal: reason QUOTA_EXCEEDED, which limit, its value and use.
absl::Status QuotaExceeded(absl::Status status, absl::string_view limit_name, int64_t limit,
                           int64_t in_use) {
  return SetErrorReason(std::move(status), "QUOTA_EXCEEDED",
                        {{"limit", std::string(limit_name)},
                         {"value", absl::StrCat(limit)},
                         {"in_use", absl::StrCat(in_use)}});
}

}  // namespace

TenantQuotas::Slot::~Slot() {
  if (owner_ != nullptr) owner_->Release(release_, amount_);
}

TenantQuotas::TenantQuotas(storage::TenantLimitsRepository& repository,
                           storage::TenantLimits defaults, absl::Duration cache_ttl)
    : repository_(repository), defaults_(std::move(defaults)), cache_ttl_(cache_ttl) {}

absl::StatusOr<storage::TenantLimits> TenantQuotas::LimitsOf(const std::string& tenant) {
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    auto it = cache_.find(tenant);
    if (it != cache_.end() && it->second.expires > now) return it->second.limits;
  }
  ASSIGN_OR_RETURN(storage::TenantLimits::Overrides overrides, repository_.Get(tenant));
  const storage::TenantLimits limits = defaults_.With(overrides);
  if (cache_ttl_ > absl::ZeroDuration()) {
    absl::MutexLock lock(&mu_);
    if (cache_.size() > 100000) cache_.clear();
    cache_[tenant] = Cached{limits, now + cache_ttl_};
  }
  return limits;
}

void TenantQuotas::Forget(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  cache_.erase(tenant);
}

absl::StatusOr<TenantQuotas::Slot> TenantQuotas::ReserveUploadBytes(const std::string& tenant,
                                                                    int64_t incoming) {
  ASSIGN_OR_RETURN(storage::TenantLimits limits, LimitsOf(tenant));
  if (limits.max_dataset_bytes <= 0) return Slot();
  ASSIGN_OR_RETURN(int64_t stored, repository_.DatasetBytes(tenant));
  absl::MutexLock lock(&mu_);
  const int64_t pending = PendingBytesLocked(tenant, absl::Now());
  if (incoming > limits.max_dataset_bytes - stored - pending) {
    return QuotaExceeded(
        absl::ResourceExhaustedError(absl::StrCat(
            "limit max_dataset_bytes of tenant \"", tenant, "\" is ", limits.max_dataset_bytes,
            " bytes; in use: ", stored, " bytes stored and ", pending,
            " bytes in uploads under way or refused recently (until the blob collector removes "
            "them), this upload: ",
            incoming, " bytes. Delete datasets you no longer need, or ",
            Raise(tenant, "max_dataset_bytes"))),
        "max_dataset_bytes", limits.max_dataset_bytes, stored + pending);
  }
  const std::string key = UploadBytesKey(tenant);
  in_use_[key] += incoming;
  return Slot(this, key, incoming);
}

void TenantQuotas::HoldRefusedBytes(const std::string& tenant, int64_t bytes, absl::Time until) {
  absl::MutexLock lock(&mu_);
  refused_[tenant].push_back(Refused{bytes, until});
}

int64_t TenantQuotas::PendingBytesLocked(const std::string& tenant, absl::Time now) {
  int64_t pending = 0;
  if (auto it = in_use_.find(UploadBytesKey(tenant)); it != in_use_.end()) {
    pending += it->second;
  }
  if (auto it = refused_.find(tenant); it != refused_.end()) {
    std::vector<Refused>& held = it->second;
    held.erase(std::remove_if(held.begin(), held.end(),
                              [now](const Refused& r) { return r.until <= now; }),
               held.end());
    for (const Refused& r : held) pending += r.bytes;
    if (held.empty()) refused_.erase(it);
  }
  return pending;
}

absl::StatusOr<TenantQuotas::Slot> TenantQuotas::AcquireGenerationStream(
    const std::string& tenant) {
  ASSIGN_OR_RETURN(storage::TenantLimits limits, LimitsOf(tenant));
  return Acquire(absl::StrCat("gen/", tenant), tenant, limits.max_generation_streams,
                 "max_generation_streams", "concurrent Generate calls");
}

absl::StatusOr<TenantQuotas::Slot> TenantQuotas::AcquireStream(const std::string& tenant) {
  ASSIGN_OR_RETURN(storage::TenantLimits limits, LimitsOf(tenant));
  return Acquire(absl::StrCat("stream/", tenant), tenant, limits.max_streams, "max_streams",
                 "long-lived calls (WatchJob, WatchStudy, ReadDataset, uploads, Generate, "
                 "ExportModel) on this server (default: gantry-server --tenant-max-streams)");
}

absl::Status TenantQuotas::CheckStudyJobs(const std::string& tenant, int64_t max_trials,
                                          int64_t folds) {
  ASSIGN_OR_RETURN(storage::TenantLimits limits, LimitsOf(tenant));
  const int64_t jobs = max_trials * std::max<int64_t>(1, folds);
  if (limits.max_study_jobs <= 0 || jobs <= limits.max_study_jobs) return absl::OkStatus();
  return QuotaExceeded(
      absl::ResourceExhaustedError(absl::StrCat(
          "spec.budget.max_trials x spec.folds: limit max_study_jobs of tenant \"", tenant,
          "\" is ", limits.max_study_jobs, " training jobs per study; this study may run ",
          max_trials, " trials x ", std::max<int64_t>(1, folds), " folds = ", jobs,
          ". Lower spec.budget.max_trials or spec.folds, or ", Raise(tenant, "max_study_jobs"))),
      "max_study_jobs", limits.max_study_jobs, jobs);
}

absl::StatusOr<TenantQuotas::Slot> TenantQuotas::Acquire(const std::string& key,
                                                         const std::string& tenant, int64_t limit,
                                                         const char* limit_name, const char* what) {
  absl::MutexLock lock(&mu_);
  int64_t& used = in_use_[key];
  if (limit > 0 && used >= limit) {
    const int64_t now_used = used;
    if (used == 0) in_use_.erase(key);
    return QuotaExceeded(
        absl::ResourceExhaustedError(absl::StrCat(
            "limit ", limit_name, " of tenant \"", tenant, "\" is ", limit, "; in use: ", now_used,
            " ", what, ". Wait for one to end, or ", Raise(tenant, limit_name))),
        limit_name, limit, now_used);
  }
  ++used;
  return Slot(this, key);
}

void TenantQuotas::Release(const std::string& key, int64_t amount) {
  absl::MutexLock lock(&mu_);
  auto it = in_use_.find(key);
  if (it == in_use_.end()) return;
  if ((it->second -= amount) <= 0) in_use_.erase(it);
}

absl::Status TenantQuotas::TakeShowers(const std::string& tenant, int64_t showers) {
  ASSIGN_OR_RETURN(storage::TenantLimits limits, LimitsOf(tenant));
  const int64_t rate = limits.max_showers_per_minute;
  if (rate <= 0) return absl::OkStatus();
  if (showers > rate) {
    return QuotaExceeded(absl::ResourceExhaustedError(absl::StrCat(
                             "limit max_showers_per_minute of tenant \"", tenant, "\" is ", rate,
                             "; this request asks for ", showers, " showers. Ask for at most ",
                             rate, " per call, or ", Raise(tenant, "max_showers_per_minute"))),
                         "max_showers_per_minute", rate, showers);
  }
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  auto [it, fresh] = buckets_.try_emplace(tenant);
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = static_cast<double>(rate);
  } else {
    const double refill = absl::ToDoubleSeconds(now - b.updated) * static_cast<double>(rate) / 60.0;
    b.tokens = std::min(static_cast<double>(rate), b.tokens + std::max(0.0, refill));
  }
  b.updated = now;
  if (b.tokens + 1e-9 < static_cast<double>(showers)) {
    const double wait_s = (static_cast<double>(showers) - b.tokens) * 60.0 / rate;
    return SetRetryDelay(
        QuotaExceeded(
            absl::ResourceExhaustedError(absl::StrCat(
                "limit max_showers_per_minute of tenant \"", tenant, "\" is ", rate,
                "; used in the last minute: ", static_cast<int64_t>(std::ceil(rate - b.tokens)),
                ", this request: ", showers, ". Try again in ",
                static_cast<int64_t>(std::ceil(wait_s)), " s, or ",
                Raise(tenant, "max_showers_per_minute"))),
            "max_showers_per_minute", rate, static_cast<int64_t>(std::ceil(rate - b.tokens))),
        absl::Seconds(std::ceil(wait_s)));
  }
  b.tokens -= static_cast<double>(showers);
  return absl::OkStatus();
}

void TenantQuotas::ReturnShowers(const std::string& tenant, int64_t showers) {
  if (showers <= 0) return;
  absl::StatusOr<storage::TenantLimits> limits = LimitsOf(tenant);
  if (!limits.ok() || limits->max_showers_per_minute <= 0) return;
  absl::MutexLock lock(&mu_);
  auto it = buckets_.find(tenant);
  if (it == buckets_.end()) return;
  it->second.tokens = std::min(static_cast<double>(limits->max_showers_per_minute),
                               it->second.tokens + static_cast<double>(showers));
}

}  // namespace gantry::server
