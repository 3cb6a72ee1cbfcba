// `gantry admin ...`: tenants and their limits, API tokens, worker join tokens, the worker list
// and pinned (explicitly loaded) models (admin tokens only).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "clients/cli/arg_parser.h"
#include "clients/cli/command.h"
#include "clients/cli/command_helpers.h"
#include "clients/cli/format.h"
#include "clients/cli/json_output.h"
#include "clients/cli/table.h"
#include "gantry/v1/admin.grpc.pb.h"

namespace gantry::cli {
namespace {

using v1::AdminService;

void PrintTenantsTable(const std::vector<const v1::Tenant*>& tenants, std::ostream& out) {
  Table table({"TENANT", "ADMIN", "CREATED"});
  for (const v1::Tenant* t : tenants) {
    table.AddRow({t->name(), t->admin() ? "yes" : "no", FormatTimestamp(t->created_at())});
  }
  table.Render(out);
}

absl::Status TenantsCreate(CommandContext& context) {
  v1::CreateTenantRequest request;
  request.set_name(context.args.Positional(0));
  request.set_admin(context.args.Has("admin"));
  v1::Tenant tenant;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::CreateTenant, request, &tenant));
  if (context.json) return PrintJson(context.out, tenant);
  PrintTenantsTable({&tenant}, context.out);
  return absl::OkStatus();
}

absl::Status TenantsList(CommandContext& context) {
  v1::ListTenantsRequest request;
  std::vector<v1::Tenant> tenants;
  std::string page_token;
  do {
    request.mutable_page()->set_page_token(page_token);
    request.mutable_page()->set_page_size(1000);
    v1::ListTenantsResponse response;
    RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::ListTenants, request, &response));
    for (auto& t : *response.mutable_tenants()) tenants.push_back(std::move(t));
    page_token = response.next_page_token();
  } while (!page_token.empty());
  std::vector<const v1::Tenant*> pointers;
  for (const auto& t : tenants) pointers.push_back(&t);
  if (context.json) {
    return PrintJsonArray(context.out, std::vector<const google::protobuf::Message*>(
                                           pointers.begin(), pointers.end()));
  }
  PrintTenantsTable(pointers, context.out);
  return absl::OkStatus();
}

absl::Status PrintSecret(CommandContext& context, const v1::CreateTokenResponse& response,
                         const std::string& what) {
  if (context.json) return PrintJson(context.out, response);
  if (context.args.Has("quiet")) {
    context.out << response.token() << '\n';
    return absl::OkStatus();
  }
  context.out << "token_id: " << response.token_id() << '\n'
              << "token:    " << response.token() << '\n';
  context.err << "This " << what << " is shown only once; store it now.\n";
  return absl::OkStatus();
}

absl::Status TokensCreate(CommandContext& context) {
  v1::CreateTokenRequest request;
  request.set_tenant(context.args.Positional(0));
  request.set_description(context.args.Get("description").value_or(""));
  v1::CreateTokenResponse response;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::CreateToken, request, &response));
  return PrintSecret(context, response, "API token");
}

absl::Status TokensRevoke(CommandContext& context) {
  v1::RevokeTokenRequest request;
  request.set_token_id(context.args.Positional(0));
  v1::RevokeTokenResponse response;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::RevokeToken, request, &response));
  if (context.json) return PrintJson(context.out, response);
  context.out << "revoked " << request.token_id() << '\n';
  return absl::OkStatus();
}

absl::Status JoinTokensCreate(CommandContext& context) {
  v1::CreateJoinTokenRequest request;
  request.set_description(context.args.Get("description").value_or(""));
  v1::CreateTokenResponse response;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::CreateJoinToken, request, &response));
  return PrintSecret(context, response, "join token");
}

absl::Status JoinTokensList(CommandContext& context) {
  v1::ListJoinTokensRequest request;
  v1::ListJoinTokensResponse response;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::ListJoinTokens, request, &response));
  if (context.json) return PrintJsonArray(context.out, response.tokens());
  if (response.tokens().empty()) {
    context.out << "No join tokens.\n";
    return absl::OkStatus();
  }
  Table table({"ID", "DESCRIPTION", "CREATED", "REVOKED", "WORKERS"});
  for (const auto& t : response.tokens()) {
    table.AddRow({t.token_id(), t.description(), FormatTimestamp(t.created_at()),
                  t.has_revoked_at() ? FormatTimestamp(t.revoked_at()) : "-",
                  absl::StrCat(t.workers())});
  }
  table.Render(context.out);
  return absl::OkStatus();
}

absl::Status JoinTokensRevoke(CommandContext& context) {
  v1::RevokeJoinTokenRequest request;
  request.set_token_id(context.args.Positional(0));
  v1::RevokeJoinTokenResponse response;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::RevokeJoinToken, request, &response));
  if (context.json) return PrintJson(context.out, response);
  context.out << "revoked " << request.token_id() << " and the credentials of "
              << response.workers_revoked() << " worker(s) it registered\n";
  return absl::OkStatus();
}

absl::Status Workers(CommandContext& context) {
  v1::ListWorkersRequest request;
  v1::ListWorkersResponse response;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::ListWorkers, request, &response));
  if (context.json) return PrintJsonArray(context.out, response.workers());
  if (response.workers().empty()) {
    context.out << "No workers.\n";
    return absl::OkStatus();
  }
  Table table({"ID", "NAME", "DEVICE", "SLOTS", "FREE", "CONNECTED", "DRAINING", "LAST_HEARTBEAT",
               "LABELS", "VERSION", "RANKS", "GEN_QUEUE", "MODELS"});
  const absl::Time now = absl::Now();
  for (const auto& w : response.workers()) {
    // Ranks as job/rank; models as their versions (or the checkpoint's prefix), warm or cold.
    std::vector<std::string> ranks;
    for (const auto& r : w.running_ranks())
      ranks.push_back(absl::StrCat(r.job_id(), "/", r.rank()));
    std::vector<std::string> models;
    for (const auto& m : w.loaded_models()) {
      const std::string name =
          m.models().empty() ? m.checkpoint_sha256().substr(0, 12) : absl::StrJoin(m.models(), "=");
      models.push_back(
          absl::StrCat(name, m.warm() ? " (warm" : " (cold", m.pinned() ? ", pinned)" : ")"));
    }
    table.AddRow({w.id(), w.name(), DeviceName(w.device()), absl::StrCat(w.slots()),
                  absl::StrCat(w.free_slots()), w.connected() ? "yes" : "no",
                  w.draining() ? "yes" : "no", FormatAge(w.last_heartbeat(), now),
                  FormatLabels(w.labels()), w.version(),
                  ranks.empty() ? "-" : absl::StrJoin(ranks, ","),
                  absl::StrCat(w.generation_queued_showers(), " showers/",
                               w.generation_active_requests(), " calls"),
                  models.empty() ? "-" : absl::StrJoin(models, ", ")});
  }
  table.Render(context.out);
  return absl::OkStatus();
}

absl::Status DrainOrUndrain(CommandContext& context, bool undrain) {
  v1::DrainWorkerRequest request;
  request.set_worker(context.args.Positional(0));
  request.set_undrain(undrain);
  v1::WorkerInfo response;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::DrainWorker, request, &response));
  if (context.json) return PrintJson(context.out, response);
  context.out << response.name() << " (" << response.id() << "): " << response.state_message()
              << '\n';
  return absl::OkStatus();
}

// A load or unload can take minutes (a worker may fetch the checkpoint first).
constexpr absl::Duration kModelLoadDeadline = absl::Minutes(5);

std::string SettingsText(const v1::BatchingSettings& b) {
  if (!b.has_max_batch_size()) return "-";
  return absl::StrCat("batch ", b.max_batch_size(), ", delay ", b.max_queue_delay_ms(),
                      " ms, queue ", b.max_queued_requests(), ", ", b.priority_levels(),
                      " priority level(s)");
}

void PrintOutcomes(CommandContext& context,
                   const google::protobuf::RepeatedPtrField<v1::ModelLoadOutcome>& outcomes,
                   bool unload) {
  Table table(unload ? std::vector<std::string>{"WORKER", "STATE", "NOTE"}
                     : std::vector<std::string>{"WORKER", "STATE", "LOAD_MS", "WARMUP_MS",
                                                "SETTINGS", "NOTE"});
  for (const v1::ModelLoadOutcome& o : outcomes) {
    const std::string name = o.worker_name().empty() ? o.worker_id() : o.worker_name();
    if (unload) {
      table.AddRow(
          {name, o.loaded() ? "unloading" : "unloaded", o.error().empty() ? "-" : o.error()});
    } else {
      table.AddRow({name, o.loaded() ? (o.warm() ? "warm" : "loaded") : "not loaded",
                    absl::StrCat(o.load_ms()), absl::StrCat(o.warmup_ms()),
                    SettingsText(o.batching()), o.error().empty() ? "-" : o.error()});
    }
  }
  table.Render(context.out);
}

absl::Status ModelsLoad(CommandContext& context) {
  v1::LoadModelRequest request;
  request.set_model(context.args.Positional(0));
  if (std::optional<std::string> workers = context.args.Get("workers")) {
    for (absl::string_view w : absl::StrSplit(*workers, ',', absl::SkipEmpty())) {
      request.add_workers(std::string(w));
    }
  }
  ASSIGN_OR_RETURN(const int count, IntFlagOr(context.args, "count", 0));
  request.set_worker_count(count);
  v1::BatchingSettings* b = request.mutable_batching();
  if (context.args.Has("max-batch")) {
    ASSIGN_OR_RETURN(const int v, IntFlagOr(context.args, "max-batch", 0));
    b->set_max_batch_size(v);
  }
  if (context.args.Has("max-delay-ms")) {
    ASSIGN_OR_RETURN(const int v, IntFlagOr(context.args, "max-delay-ms", 0));
    b->set_max_queue_delay_ms(v);
  }
  if (context.args.Has("queue")) {
    ASSIGN_OR_RETURN(const int v, IntFlagOr(context.args, "queue", 0));
    b->set_max_queued_requests(v);
  }
  if (context.args.Has("priority-levels")) {
    ASSIGN_OR_RETURN(const int v, IntFlagOr(context.args, "priority-levels", 0));
    b->set_priority_levels(v);
  }
  ASSIGN_OR_RETURN(Connection * connection, context.connect());
  AdminService::Stub stub(connection->channel());
  auto rpc = connection->NewLongContext(kModelLoadDeadline);
  v1::LoadModelResponse response;
  RETURN_IF_ERROR(
      FromGrpc(stub.LoadModel(rpc.get(), request, &response), connection->config().server));
  if (context.json) return PrintJson(context.out, response);
  context.out << response.model_ref() << ": warm on " << response.warm_workers() << " of "
              << response.workers_size() << " worker(s), pinned\n";
  if (response.workers().empty()) {
    context.out << "No worker serves generation now; it loads when one connects.\n";
    return absl::OkStatus();
  }
  PrintOutcomes(context, response.workers(), false);
  return absl::OkStatus();
}

absl::Status ModelsUnload(CommandContext& context) {
  v1::UnloadModelRequest request;
  request.set_model(context.args.Positional(0));
  ASSIGN_OR_RETURN(Connection * connection, context.connect());
  AdminService::Stub stub(connection->channel());
  auto rpc = connection->NewLongContext(kModelLoadDeadline);
  v1::UnloadModelResponse response;
  RETURN_IF_ERROR(
      FromGrpc(stub.UnloadModel(rpc.get(), request, &response), connection->config().server));
  if (context.json) return PrintJson(context.out, response);
  context.out << response.model_ref() << ": unpinned\n";
  if (!response.workers().empty()) PrintOutcomes(context, response.workers(), true);
  return absl::OkStatus();
}

absl::Status WorkersDrain(CommandContext& context) { return DrainOrUndrain(context, false); }
absl::Status WorkersUndrain(CommandContext& context) { return DrainOrUndrain(context, true); }

// The limit flags of `admin tenants limits set`, with their fields.
struct LimitFlag {
  const char* flag;
  const char* field;
};
constexpr LimitFlag kLimitFlags[] = {
    {"max-dataset-bytes", "max_dataset_bytes"},
    {"max-concurrent-jobs", "max_concurrent_jobs"},
    {"max-generation-streams", "max_generation_streams"},
    {"max-showers-per-minute", "max_showers_per_minute"},
    {"max-showers-per-request", "max_showers_per_request"},
    {"max-streams", "max_streams"},
    {"max-study-jobs", "max_study_jobs"},
};

std::string LimitText(const v1::TenantLimitValues& values, const char* field, bool effective) {
  const google::protobuf::Reflection* r = values.GetReflection();
  const google::protobuf::FieldDescriptor* f = values.GetDescriptor()->FindFieldByName(field);
  if (!r->HasField(values, f)) return effective ? "unlimited" : "default";
  const int64_t v = r->GetInt64(values, f);
  return v == 0 ? "unlimited" : absl::StrCat(v);
}

absl::Status PrintLimits(CommandContext& context, const v1::TenantLimitsInfo& info) {
  if (context.json) return PrintJson(context.out, info);
  Table table({"LIMIT", "ENFORCED", "OVERRIDE", "IN USE"});
  for (const LimitFlag& l : kLimitFlags) {
    std::string use = "-";
    if (std::string(l.field) == "max_dataset_bytes")
      use = absl::StrCat(info.dataset_bytes_in_use());
    if (std::string(l.field) == "max_concurrent_jobs") use = absl::StrCat(info.active_jobs());
    table.AddRow({l.field, LimitText(info.effective(), l.field, true),
                  LimitText(info.overrides(), l.field, false), use});
  }
  table.AddRow({"fair_share_weight", absl::StrCat(info.effective().fair_share_weight()),
                info.overrides().has_fair_share_weight()
                    ? absl::StrCat(info.overrides().fair_share_weight())
                    : std::string("default"),
                "-"});
  const std::map<std::string, int64_t> quotas(info.effective().max_slots_per_pool().begin(),
                                              info.effective().max_slots_per_pool().end());
  for (const auto& [pool, slots] : quotas) {
    table.AddRow({absl::StrCat("max_slots_per_pool[", pool, "]"),
                  slots == 0 ? std::string("unlimited") : absl::StrCat(slots),
                  slots == 0 ? std::string("unlimited") : absl::StrCat(slots), "-"});
  }
  table.AddRow({"monthly_budget_usd",
                info.effective().monthly_budget_usd() > 0
                    ? absl::StrCat(info.effective().monthly_budget_usd())
                    : "unlimited",
                info.overrides().has_monthly_budget_usd()
                    ? absl::StrCat(info.overrides().monthly_budget_usd())
                    : "default",
                "gantry costs"});
  context.out << "tenant " << info.tenant() << '\n';
  table.Render(context.out);
  return absl::OkStatus();
}

absl::Status TenantLimitsGet(CommandContext& context) {
  v1::GetTenantLimitsRequest request;
  request.set_tenant(context.args.Positional(0));
  v1::TenantLimitsInfo info;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::GetTenantLimits, request, &info));
  return PrintLimits(context, info);
}

// Changes only the limits given (read, modify, write); "default" drops an override.
absl::Status TenantLimitsSet(CommandContext& context) {
  v1::GetTenantLimitsRequest get;
  get.set_tenant(context.args.Positional(0));
  v1::TenantLimitsInfo current;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::GetTenantLimits, get, &current));
  v1::SetTenantLimitsRequest request;
  request.set_tenant(get.tenant());
  *request.mutable_overrides() = current.overrides();
  v1::TenantLimitValues* o = request.mutable_overrides();
  bool any = false;
  for (const LimitFlag& l : kLimitFlags) {
    std::optional<std::string> value = context.args.Get(l.flag);
    if (!value) continue;
    any = true;
    const google::protobuf::FieldDescriptor* f = o->GetDescriptor()->FindFieldByName(l.field);
    if (*value == "default") {
      o->GetReflection()->ClearField(o, f);
      continue;
    }
    ASSIGN_OR_RETURN(uint64_t n, ParseUint64Flag(l.flag, *value));
    if (n > static_cast<uint64_t>(INT64_MAX)) {
      return UsageError(absl::StrCat("--", l.flag, ": ", *value, " is too large"));
    }
    o->GetReflection()->SetInt64(o, f, static_cast<int64_t>(n));
  }
  if (std::optional<std::string> weight = context.args.Get("fair-share-weight")) {
    any = true;
    double w = 0;
    if (*weight == "default") {
      o->clear_fair_share_weight();
    } else if (!absl::SimpleAtod(*weight, &w) || !(w > 0) || w > 1e6) {
      return UsageError(absl::StrCat("--fair-share-weight: \"", *weight,
                                     "\" is not a weight; give a number above 0 and at most 1e6, "
                                     "or \"default\" (1)"));
    } else {
      o->set_fair_share_weight(w);
    }
  }
  if (std::optional<std::string> quotas = context.args.Get("max-slots-per-pool")) {
    any = true;
    o->clear_max_slots_per_pool();
    if (*quotas != "default") {
      for (absl::string_view pair : absl::StrSplit(*quotas, ',', absl::SkipEmpty())) {
        std::pair<std::string, std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
        int64_t slots = 0;
        if (kv.first.empty() || !absl::SimpleAtoi(kv.second, &slots) || slots < 0) {
          return UsageError(absl::StrCat("--max-slots-per-pool: \"", pair,
                                         "\" is not POOL=SLOTS; give e.g. hpc=8,cloud=0 "
                                         "(0 = no quota), or \"default\" for none"));
        }
        (*o->mutable_max_slots_per_pool())[kv.first] = slots;
      }
    }
  }
  if (std::optional<std::string> value = context.args.Get("monthly-budget-usd")) {
    any = true;
    if (*value == "default") {
      o->clear_monthly_budget_usd();
    } else {
      ASSIGN_OR_RETURN(double usd, ParseDoubleFlag("monthly-budget-usd", *value));
      o->set_monthly_budget_usd(usd);  // the server checks the range
    }
  }
  if (!any) {
    return UsageError(
        "give at least one of --max-dataset-bytes, --max-concurrent-jobs, "
        "--max-generation-streams, --max-showers-per-minute, --max-showers-per-request, "
        "--max-streams, --max-study-jobs, --monthly-budget-usd (a number, 0 = unlimited, or "
        "\"default\"), --fair-share-weight or --max-slots-per-pool");
  }
  v1::TenantLimitsInfo info;
  RETURN_IF_ERROR(CallUnary(context, &AdminService::Stub::SetTenantLimits, request, &info));
  return PrintLimits(context, info);
}

// The commands that list, unload and drain workers.
void AddAdminWorkerCommands(std::vector<Command>* commands) {
  commands->push_back({{"admin", "workers"}, "List registered workers", "", {}, {}, Workers});
  commands->push_back(
      {{"admin", "models", "load"},
       "Load a model version on serving workers, pinned and warm, with its batching settings",
       "Each worker loads the model, runs one warm-up batch and keeps it pinned (its model cache "
       "never evicts it for another model) until 'admin models unload'. The pin and its settings "
       "are stored and re-applied when a worker (re)connects. Settings not given take the worker "
       "daemon's --max-batch-size, --max-queue-delay-ms and --max-queued-requests; loading again "
       "replaces the workers and settings.",
       {{"MODEL", "NAME:VERSION, NAME@ALIAS or OWNER/NAME:VERSION"}},
       {{"workers", "W1,W2", "worker names or ids (default: every worker serving generation)"},
        {"count", "N", "load on N serving workers (the least busy) instead of all"},
        {"max-batch", "N", "showers per batch, 1..4096"},
        {"max-delay-ms", "MS", "longest wait for a batch to fill, 0..10000"},
        {"queue", "N", "requests queued per worker before RESOURCE_EXHAUSTED, 1..1000000"},
        {"priority-levels", "N", "Generate priorities served in order, 1..10 (default 1)"}},
       ModelsLoad});
  commands->push_back({{"admin", "models", "unload"},
                       "Unpin a model version and unload it from the workers",
                       "Requests in flight finish first.",
                       {{"MODEL", "NAME:VERSION, NAME@ALIAS or OWNER/NAME:VERSION"}},
                       {},
                       ModelsUnload});
  commands->push_back({{"admin", "workers", "drain"},
                       "Drain a worker: no new placements; its jobs checkpoint and move",
                       "Each running job with ranks on the worker saves a checkpoint at its next "
                       "step boundary and restarts on other workers (reason Drained, not counted "
                       "against max_restarts). The drain is stored: it lasts until undrain.",
                       {{"WORKER", "worker name or id"}},
                       {},
                       WorkersDrain});
  commands->push_back({{"admin", "workers", "undrain"},
                       "Put a drained worker back into service",
                       "",
                       {{"WORKER", "worker name or id"}},
                       {},
                       WorkersUndrain});
}

}  // namespace

void AddAdminCommands(std::vector<Command>* commands) {
  commands->push_back({{"admin", "tenants", "create"},
                       "Create a tenant",
                       "",
                       {{"NAME", "[a-z][a-z0-9-]{0,62}"}},
                       {{"admin", "", "the tenant's tokens may call the admin commands"}},
                       TenantsCreate});
  commands->push_back({{"admin", "tenants", "list"}, "List tenants", "", {}, {}, TenantsList});
  commands->push_back({{"admin", "tenants", "limits"},
                       "Show a tenant's limits, its overrides and its use",
                       "",
                       {{"TENANT", "tenant name"}},
                       {},
                       TenantLimitsGet});
  commands->push_back(
      {{"admin", "tenants", "limits", "set"},
       "Change a tenant's limits (only the ones given)",
       "Each value is a number (0 = unlimited) or \"default\" (the server's --tenant-max-* flag, "
       "or --max-showers-per-request). "
       "Exceeding a limit answers RESOURCE_EXHAUSTED naming it.",
       {{"TENANT", "tenant name"}},
       {{"max-dataset-bytes", "N", "bytes of stored datasets"},
        {"max-concurrent-jobs", "N", "jobs QUEUED, PLACING, RUNNING or RESTARTING"},
        {"max-generation-streams", "N", "concurrent Generate calls (per server)"},
        {"max-showers-per-minute", "N", "generated showers per minute (per server)"},
        {"max-showers-per-request", "N", "showers one Generate call may ask for"},
        {"max-streams", "N",
         "long-lived calls at once: watches, uploads, reads, Generate, exports (per server)"},
        {"max-study-jobs", "N", "training jobs one study may run (max_trials x folds)"},
        {"fair-share-weight", "W", "the tenant's weight in the scheduler's fair share (default 1)"},
        {"max-slots-per-pool", "POOL=N,...",
         "the most slots its jobs hold in each pool at once (replaces all; \"default\": none)"},
        {"monthly-budget-usd", "USD",
         "spend per calendar month (UTC); once reached the tenant's queued jobs wait"}},
       TenantLimitsSet});
  commands->push_back({{"admin", "tokens", "create"},
                       "Issue an API token for a tenant (the secret is shown once)",
                       "",
                       {{"TENANT", "tenant name"}},
                       {{"description", "TEXT", "what the token is for"},
                        {"quiet", "", "print only the secret (for scripts)"}},
                       TokensCreate});
  commands->push_back({{"admin", "tokens", "revoke"},
                       "Revoke an API token",
                       "",
                       {{"TOKEN_ID", "the token_id printed by 'admin tokens create'"}},
                       {},
                       TokensRevoke});
  commands->push_back({{"admin", "join-tokens", "create"},
                       "Issue a worker join token (the secret is shown once)",
                       "",
                       {},
                       {{"description", "TEXT", "what the token is for"},
                        {"quiet", "", "print only the secret (for scripts)"}},
                       JoinTokensCreate});
  commands->push_back({{"admin", "join-tokens", "list"},
                       "List worker join tokens (never their secrets)",
                       "",
                       {},
                       {},
                       JoinTokensList});
  commands->push_back({{"admin", "join-tokens", "revoke"},
                       "Revoke a join token and the credentials of the workers it registered",
                       "No new worker can register with the token, and every worker whose "
                       "credential it issued is cut off (its control stream ends, its ranks' "
                       "credentials stop working); such a worker comes back only by registering "
                       "with another valid join token.",
                       {{"TOKEN_ID", "the jtk-... id printed by 'admin join-tokens list'"}},
                       {},
                       JoinTokensRevoke});
  AddAdminWorkerCommands(commands);
}

}  // namespace gantry::cli
