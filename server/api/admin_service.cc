#include "server/api/admin_service.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/safe_text.h"
#include "base/status_macros.h"
#include "google/protobuf/util/time_util.h"
#include "server/requests/admin_requests.h"
#include "server/requests/field_checks.h"

namespace gantry::server {

namespace {

// Revokes a join token and the credentials of the workers it issued (their streams end at their
// next message); how many workers lost their credential.
absl::StatusOr<int> RevokeJoinTokenAndWorkers(storage::WorkerIdentityRepository& identities,
                                              WorkerCredentials& credentials,
                                              const std::string& token_id) {
  ASSIGN_OR_RETURN(std::vector<std::string> workers, identities.RevokeJoinToken(token_id));
  credentials.Revoke(token_id, workers);
  return static_cast<int>(workers.size());
}

}  // namespace

namespace v1 = ::gantry::v1;

namespace {

// Copies what the worker's latest heartbeat said into `w`; `versions`: checkpoint -> the versions
// stored with it.
void FillReport(const WorkerReport& report,
                const std::map<std::string, std::vector<std::string>>& versions,
                v1::WorkerInfo* w) {
  const v1::Heartbeat& hb = report.heartbeat;
  for (const v1::LoadedModel& m : hb.loaded_models()) {
    v1::WorkerModel* out = w->add_loaded_models();
    if (auto it = versions.find(m.checkpoint_sha256()); it != versions.end()) {
      for (const std::string& v : it->second) out->add_models(v);
    }
    out->set_checkpoint_sha256(m.checkpoint_sha256());
    out->set_memory_bytes(m.memory_bytes());
    out->set_warm(m.warm());
    out->set_active_requests(m.active_requests());
    out->set_queued_showers(m.queued_showers());
    out->set_pinned(m.pinned());
    if (m.has_batching()) *out->mutable_batching() = m.batching();
    out->set_largest_batch(m.largest_batch());
  }
  w->set_generation_active_requests(hb.generation_active_requests());
  w->set_generation_queued_showers(hb.generation_queued_showers());
  for (const v1::RunningRank& r : hb.running_ranks()) {
    v1::WorkerRank* out = w->add_running_ranks();
    out->set_job_id(r.job_id());
    out->set_attempt(r.attempt());
    out->set_rank(r.rank());
  }
  *w->mutable_reported_at() =
      google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(report.at));
}

}  // namespace

grpc::Status AdminService::CreateTenant(grpc::ServerContext* context,
                                        const v1::CreateTenantRequest* request,
                                        v1::Tenant* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    RETURN_IF_ERROR(ValidateTenantName(request->name(), "name"));
    ASSIGN_OR_RETURN(*response, tenants_.CreateTenant(request->name(), request->admin()));
    return absl::OkStatus();
  });
}

grpc::Status AdminService::ListTenants(grpc::ServerContext* context,
                                       const v1::ListTenantsRequest* request,
                                       v1::ListTenantsResponse* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    ASSIGN_OR_RETURN(int page_size, ValidatePage(request->page(), "page"));
    ASSIGN_OR_RETURN(auto page, tenants_.ListTenants(page_size, request->page().page_token()));
    for (v1::Tenant& t : page.items) *response->add_tenants() = std::move(t);
    response->set_next_page_token(page.next_page_token);
    return absl::OkStatus();
  });
}

grpc::Status AdminService::CreateToken(grpc::ServerContext* context,
                                       const v1::CreateTokenRequest* request,
                                       v1::CreateTokenResponse* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    RETURN_IF_ERROR(ValidateTenantName(request->tenant(), "tenant"));
    RETURN_IF_ERROR(ValidateDescription(request->description(), "description"));
    ASSIGN_OR_RETURN(storage::IssuedToken token,
                     tokens_.CreateToken(request->tenant(), request->description()));
    response->set_token_id(token.token_id);
    response->set_token(token.secret);
    return absl::OkStatus();
  });
}

grpc::Status AdminService::RevokeToken(grpc::ServerContext* context,
                                       const v1::RevokeTokenRequest* request,
                                       v1::RevokeTokenResponse* /*response*/) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    const std::string& id = request->token_id();
    if (absl::StartsWith(id, "jtk-")) {
      RETURN_IF_ERROR(ValidateId(id, "jtk-", "token_id"));
    } else {
      RETURN_IF_ERROR(ValidateId(id, "tok-", "token_id"));
    }
    if (absl::StartsWith(id, "jtk-")) {
      return RevokeJoinTokenAndWorkers(identities_, credentials_, id).status();
    }
    absl::Status revoked = tokens_.RevokeToken(id);
    auth_.ForgetTokens();  // the token cache must not outlive a revocation made here
    return revoked;
  });
}

grpc::Status AdminService::CreateJoinToken(grpc::ServerContext* context,
                                           const v1::CreateJoinTokenRequest* request,
                                           v1::CreateTokenResponse* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    RETURN_IF_ERROR(ValidateDescription(request->description(), "description"));
    ASSIGN_OR_RETURN(storage::IssuedToken token, tokens_.CreateJoinToken(request->description()));
    response->set_token_id(token.token_id);
    response->set_token(token.secret);
    return absl::OkStatus();
  });
}

grpc::Status AdminService::ListJoinTokens(grpc::ServerContext* context,
                                          const v1::ListJoinTokensRequest* /*request*/,
                                          v1::ListJoinTokensResponse* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<v1::JoinTokenInfo> tokens, identities_.ListJoinTokens());
    for (v1::JoinTokenInfo& t : tokens) *response->add_tokens() = std::move(t);
    return absl::OkStatus();
  });
}

grpc::Status AdminService::RevokeJoinToken(grpc::ServerContext* context,
                                           const v1::RevokeJoinTokenRequest* request,
                                           v1::RevokeJoinTokenResponse* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    RETURN_IF_ERROR(ValidateId(request->token_id(), "jtk-", "token_id"));
    ASSIGN_OR_RETURN(int revoked,
                     RevokeJoinTokenAndWorkers(identities_, credentials_, request->token_id()));
    response->set_workers_revoked(revoked);
    return absl::OkStatus();
  });
}

grpc::Status AdminService::ListWorkers(grpc::ServerContext* context,
                                       const v1::ListWorkersRequest* /*request*/,
                                       v1::ListWorkersResponse* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<v1::WorkerInfo> workers, workers_.List());
    const std::map<std::string, WorkerReport> reports = sessions_.Reports();
    std::set<std::string> checkpoints;
    for (const auto& [id, report] : reports) {
      for (const v1::LoadedModel& m : report.heartbeat.loaded_models()) {
        if (checkpoints.size() < 1000) checkpoints.insert(m.checkpoint_sha256());
      }
    }
    ASSIGN_OR_RETURN(const auto versions, models_.VersionsByCheckpoint(std::vector<std::string>(
                                              checkpoints.begin(), checkpoints.end())));
    for (v1::WorkerInfo& w : workers) {
      // A preemption is known only in memory; an operator's drain is also stored.
      if (sessions_.Draining(w.id())) w.set_draining(true);
      if (auto it = reports.find(w.id()); it != reports.end()) FillReport(it->second, versions, &w);
      *response->add_workers() = std::move(w);
    }
    return absl::OkStatus();
  });
}

grpc::Status AdminService::DrainWorker(grpc::ServerContext* context,
                                       const v1::DrainWorkerRequest* request,
                                       v1::WorkerInfo* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    if (request->worker().empty() || request->worker().size() > 256) {
      return checks::Invalid("worker", "give the worker's name or id (ListWorkers)");
    }
    ASSIGN_OR_RETURN(std::vector<v1::WorkerInfo> workers, workers_.List());
    const v1::WorkerInfo* found = nullptr;
    for (const v1::WorkerInfo& w : workers) {
      if (w.id() == request->worker() || w.name() == request->worker()) found = &w;
    }
    if (found == nullptr) {
      return absl::NotFoundError(absl::StrCat("worker: no registered worker is named \"",
                                              BoundedField(request->worker()), "\""));
    }
    const bool drain = !request->undrain();
    RETURN_IF_ERROR(workers_.SetDraining(found->id(), drain));
    const int moved = sessions_.Drain(found->id(), drain);
    *response = *found;
    response->set_draining(sessions_.Draining(found->id()));
    response->set_state_message(
        drain ? absl::StrCat("drained: no new placements; ", moved,
                             moved == 1 ? " job checkpoints" : " jobs checkpoint",
                             " and moves to other workers")
              : "undrained: takes new placements again");
    return absl::OkStatus();
  });
}

namespace {

storage::TenantLimits::Overrides OverridesFromProto(const v1::TenantLimitValues& v) {
  storage::TenantLimits::Overrides o;
  if (v.has_max_dataset_bytes()) o.max_dataset_bytes = v.max_dataset_bytes();
  if (v.has_max_concurrent_jobs()) o.max_concurrent_jobs = v.max_concurrent_jobs();
  if (v.has_max_generation_streams()) o.max_generation_streams = v.max_generation_streams();
  if (v.has_max_showers_per_minute()) o.max_showers_per_minute = v.max_showers_per_minute();
  if (v.has_fair_share_weight()) o.fair_share_weight = v.fair_share_weight();
  if (v.has_max_streams()) o.max_streams = v.max_streams();
  if (v.has_max_showers_per_request()) o.max_showers_per_request = v.max_showers_per_request();
  if (v.has_max_study_jobs()) o.max_study_jobs = v.max_study_jobs();
  o.max_slots_per_pool.insert(v.max_slots_per_pool().begin(), v.max_slots_per_pool().end());
  return o;
}

void OverridesToProto(const storage::TenantLimits::Overrides& o, v1::TenantLimitValues* v) {
  if (o.max_dataset_bytes) v->set_max_dataset_bytes(*o.max_dataset_bytes);
  if (o.max_concurrent_jobs) v->set_max_concurrent_jobs(*o.max_concurrent_jobs);
  if (o.max_generation_streams) v->set_max_generation_streams(*o.max_generation_streams);
  if (o.max_showers_per_minute) v->set_max_showers_per_minute(*o.max_showers_per_minute);
  if (o.fair_share_weight) v->set_fair_share_weight(*o.fair_share_weight);
  if (o.max_streams) v->set_max_streams(*o.max_streams);
  if (o.max_showers_per_request) v->set_max_showers_per_request(*o.max_showers_per_request);
  if (o.max_study_jobs) v->set_max_study_jobs(*o.max_study_jobs);
  v->mutable_max_slots_per_pool()->insert(o.max_slots_per_pool.begin(), o.max_slots_per_pool.end());
}

// A quota on a pool that does not exist is refused: a typo would otherwise limit nothing.
absl::Status CheckQuotaPools(storage::PoolRepository& pools, const v1::TenantLimitValues& v) {
  if (v.max_slots_per_pool().empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<v1::Pool> defined, pools.List());
  std::set<std::string> names;
  for (const v1::Pool& pool : defined) names.insert(pool.name());
  for (const auto& [pool, slots] : v.max_slots_per_pool()) {
    if (names.count(pool)) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "overrides.max_slots_per_pool: no pool is named \"", pool,
        "\"; defined pools: ", names.empty() ? std::string("none") : absl::StrJoin(names, ", "),
        " (create the pool first, or fix the name)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AdminService::DescribeLimits(const std::string& tenant, v1::TenantLimitsInfo* info) {
  ASSIGN_OR_RETURN(storage::TenantLimits::Overrides overrides, tenant_limits_.Get(tenant));
  const storage::TenantLimits effective = quotas_.defaults().With(overrides);
  info->set_tenant(tenant);
  OverridesToProto(overrides, info->mutable_overrides());
  v1::TenantLimitValues* e = info->mutable_effective();
  e->set_max_dataset_bytes(effective.max_dataset_bytes);
  e->set_max_concurrent_jobs(effective.max_concurrent_jobs);
  e->set_max_generation_streams(effective.max_generation_streams);
  e->set_max_showers_per_minute(effective.max_showers_per_minute);
  e->set_fair_share_weight(effective.fair_share_weight);
  e->set_max_streams(effective.max_streams);
  e->set_max_showers_per_request(effective.max_showers_per_request);
  e->set_max_study_jobs(effective.max_study_jobs);
  e->mutable_max_slots_per_pool()->insert(effective.max_slots_per_pool.begin(),
                                          effective.max_slots_per_pool.end());
  ASSIGN_OR_RETURN(int64_t bytes, tenant_limits_.DatasetBytes(tenant));
  ASSIGN_OR_RETURN(int64_t jobs, tenant_limits_.ActiveJobs(tenant));
  ASSIGN_OR_RETURN(std::optional<double> budget, costs_.MonthlyBudget(tenant));
  if (budget) info->mutable_overrides()->set_monthly_budget_usd(*budget);
  e->set_monthly_budget_usd(budget.value_or(0));
  info->set_dataset_bytes_in_use(bytes);
  info->set_active_jobs(jobs);
  return absl::OkStatus();
}

grpc::Status AdminService::SetTenantLimits(grpc::ServerContext* context,
                                           const v1::SetTenantLimitsRequest* request,
                                           v1::TenantLimitsInfo* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    RETURN_IF_ERROR(ValidateTenantName(request->tenant(), "tenant"));
    RETURN_IF_ERROR(CheckQuotaPools(pools_, request->overrides()));
    std::optional<double> budget;
    if (request->overrides().has_monthly_budget_usd()) {
      budget = request->overrides().monthly_budget_usd();
      if (!std::isfinite(*budget) || *budget < 0) {
        return checks::Invalid("overrides.monthly_budget_usd",
                               absl::StrCat(*budget,
                                            " is not a budget; give a finite amount >= 0 "
                                            "in USD (0 = unlimited)"));
      }
    }
    RETURN_IF_ERROR(
        tenant_limits_.Set(request->tenant(), OverridesFromProto(request->overrides())));
    RETURN_IF_ERROR(costs_.SetMonthlyBudget(request->tenant(), budget));
    quotas_.Forget(request->tenant());
    return DescribeLimits(request->tenant(), response);
  });
}

grpc::Status AdminService::GetTenantLimits(grpc::ServerContext* context,
                                           const v1::GetTenantLimitsRequest* request,
                                           v1::TenantLimitsInfo* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    RETURN_IF_ERROR(ValidateTenantName(request->tenant(), "tenant"));
    return DescribeLimits(request->tenant(), response);
  });
}

absl::StatusOr<v1::ModelVersion> AdminService::ResolveForAdmin(const std::string& tenant,
                                                               const std::string& ref) {
  // "owner/name:version" sees every owner's versions (the admin view); an unqualified reference
  // resolves as for the admin tenant itself (its own, then public versions).
  return resolver_.ResolveModel(absl::StrContains(ref, '/') ? "" : tenant, ref);
}

grpc::Status AdminService::LoadModel(grpc::ServerContext* context,
                                     const v1::LoadModelRequest* request,
                                     v1::LoadModelResponse* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateLoadModel(*request));
    absl::StatusOr<v1::ModelVersion> model = ResolveForAdmin(p.tenant, request->model());
    if (!model.ok()) {
      return absl::Status(model.status().code(), absl::StrCat("model: ", model.status().message()));
    }
    ASSIGN_OR_RETURN(*response, pinner_.Load(*request, *model));
    return absl::OkStatus();
  });
}

grpc::Status AdminService::UnloadModel(grpc::ServerContext* context,
                                       const v1::UnloadModelRequest* request,
                                       v1::UnloadModelResponse* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateUnloadModel(*request));
    absl::StatusOr<v1::ModelVersion> model = ResolveForAdmin(p.tenant, request->model());
    if (!model.ok()) {
      return absl::Status(model.status().code(), absl::StrCat("model: ", model.status().message()));
    }
    ASSIGN_OR_RETURN(*response, pinner_.Unload(*model));
    return absl::OkStatus();
  });
}

}  // namespace gantry::server
