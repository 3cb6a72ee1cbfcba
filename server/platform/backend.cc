#include "server/platform/backend.h"

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/secret_file.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "server/platform/secret_file.h"
#include "storage/migrator.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

// Bootstrap tokens are at least this long (a guessable secret is refused at start).
constexpr size_t kMinTokenChars = 16;

absl::Status BootstrapAdmin(Backend& backend, const std::string& path) {
  ASSIGN_OR_RETURN(std::string secret, ReadSecretFile(path, "--admin-token-file",
                                                      "the admin tenant's token", kMinTokenChars));
  absl::StatusOr<v1::Tenant> tenant = backend.tenants->CreateTenant("admin", true);
  if (absl::IsAlreadyExists(tenant.status())) tenant = backend.tenants->GetTenant("admin");
  RETURN_IF_ERROR(tenant.status());
  if (!tenant->admin()) {
    return absl::FailedPreconditionError(
        "tenant \"admin\" exists but is not an admin; --admin-token-file cannot use it");
  }
  return backend.tokens->ImportToken("admin", secret, "bootstrap (--admin-token-file)").status();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> Backend::Create(const ServerOptions& options) {
  std::unique_ptr<Backend> backend(new Backend(options));
  storage::DatabaseOptions db_options;
  db_options.pool_size = options.db.pool_size;
  db_options.connect_timeout = options.db.connect_timeout;
  db_options.statement_timeout = options.db.statement_timeout;
  db_options.pool_wait = options.db.pool_wait;
  ASSIGN_OR_RETURN(backend->db, storage::Database::Create(options.db.dsn, db_options));
  ASSIGN_OR_RETURN(backend->migrations_applied, storage::Migrator::Apply(*backend->db));
  ASSIGN_OR_RETURN(backend->blobs, storage::BlobStore::Create(options.data_dir));
  storage::Database& db = *backend->db;
  backend->tenants = std::make_unique<storage::TenantRepository>(db);
  backend->tokens = std::make_unique<storage::TokenRepository>(db);
  backend->web_sessions = std::make_unique<storage::WebSessionRepository>(db);
  backend->jobs = std::make_unique<storage::JobRepository>(db);
  backend->jobs->set_change_listener(
      [b = backend.get()](const std::string& job_id) { b->job_notifier.Notify(job_id); });
  backend->datasets = std::make_unique<storage::DatasetRepository>(db);
  backend->blob_refs = std::make_unique<storage::BlobRepository>(db);
  backend->tenant_limits = std::make_unique<storage::TenantLimitsRepository>(db);
  backend->quotas = std::make_unique<TenantQuotas>(*backend->tenant_limits, options.default_limits,
                                                   options.auth_cache_ttl);
  backend->models = std::make_unique<storage::ModelRepository>(db);
  backend->model_pins = std::make_unique<storage::ModelPinRepository>(db);
  backend->pools = std::make_unique<storage::PoolRepository>(db);
  backend->costs = std::make_unique<storage::CostRepository>(db);
  backend->studies = std::make_unique<storage::StudyRepository>(db);
  backend->workers = std::make_unique<storage::WorkerRepository>(db);
  backend->identities = std::make_unique<storage::WorkerIdentityRepository>(db);
  // Kept out of the database (schema version 17 deleted it there), so a copy of the database
  // cannot forge rank credentials; a restarted server reads the same file.
  ASSIGN_OR_RETURN(
      std::string rank_key,
      LoadOrCreateKeyFile(options.rank_key_file.empty() ? options.data_dir + "/rank-credentials.key"
                                                        : options.rank_key_file,
                          "--rank-key-file"));
  backend->credentials =
      std::make_unique<WorkerCredentials>(*backend->identities, std::move(rank_key));
  if (!options.admin_token_file.empty()) {
    RETURN_IF_ERROR(BootstrapAdmin(*backend, options.admin_token_file));
  }
  if (!options.join_token_file.empty()) {
    ASSIGN_OR_RETURN(std::string secret,
                     ReadSecretFile(options.join_token_file, "--join-token-file",
                                    "the worker join token", kMinTokenChars));
    RETURN_IF_ERROR(
        backend->tokens->ImportJoinToken(secret, "bootstrap (--join-token-file)").status());
  }
  return backend;
}

absl::StatusOr<Principal> Backend::VerifyToken(Audience audience, const std::string& secret) {
  if (audience == Audience::kWorkerJoin) return credentials->VerifyJoinToken(secret);
  if (audience == Audience::kWorker ||
      (audience == Audience::kTenantOrWorker && WorkerCredentials::IsWorkerSecret(secret))) {
    if (!WorkerCredentials::IsWorkerSecret(secret)) {
      return absl::UnauthenticatedError(
          "WorkerService calls other than Register need the worker credential Register returned "
          "(or a rank's credential); a join token is accepted only by Register");
    }
    return credentials->VerifyWorkerSecret(secret);
  }
  const bool session = storage::WebSessionRepository::IsSessionSecret(secret);
  if (session && audience != Audience::kTenant) {
    return absl::UnauthenticatedError(
        "a browser session is accepted only by the tenant services; use an API token");
  }
  const std::string key = Sha256Hex(secret);
  const uint64_t generation = token_cache_.Generation();
  if (std::optional<Principal> cached = token_cache_.Get(key); cached.has_value()) {
    if (audience == Audience::kAdmin && !cached->admin) {
      return absl::PermissionDeniedError(
          absl::StrCat("AdminService needs an admin tenant's token; tenant \"", cached->tenant,
                       "\" is not an admin"));
    }
    return *cached;
  }
  absl::StatusOr<storage::TokenTenant> tenant =
      session ? web_sessions->Authenticate(secret) : tokens->Authenticate(secret);
  if (session && absl::IsUnauthenticated(tenant.status())) return tenant.status();
  if (absl::IsUnauthenticated(tenant.status())) {
    return absl::UnauthenticatedError(
        "the bearer token is unknown or revoked; ask an admin for a "
        "token (AdminService.CreateToken)");
  }
  RETURN_IF_ERROR(tenant.status());
  if (audience == Audience::kAdmin && !tenant->admin) {
    return absl::PermissionDeniedError(
        absl::StrCat("AdminService needs an admin tenant's token; tenant \"", tenant->tenant,
                     "\" is not an admin"));
  }
  Principal principal;
  principal.tenant = tenant->tenant;
  principal.admin = tenant->admin;
  token_cache_.Put(key, principal, generation);
  return principal;
}

absl::StatusOr<v1::ModelVersion> Backend::ResolveModel(const std::string& viewer,
                                                       const std::string& ref) {
  const std::string key = absl::StrCat(viewer, "\n", ref);
  const uint64_t generation = model_cache_.Generation();
  if (std::optional<v1::ModelVersion> cached = model_cache_.Get(key); cached.has_value()) {
    return *std::move(cached);
  }
  ASSIGN_OR_RETURN(v1::ModelVersion model, models->Resolve(viewer, ref));
  model.clear_histograms();
  model_cache_.Put(key, model, generation);
  return model;
}

absl::Status Backend::RecheckToken(const grpc::ServerContextBase& context, Audience audience) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return absl::UnauthenticatedError("missing authorization metadata");
  const std::string value(it->second.data(), it->second.size());
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWithIgnoreCase(value, kBearer)) {
    return absl::UnauthenticatedError("authorization metadata must be \"Bearer <token>\"");
  }
  const std::string secret(absl::StripAsciiWhitespace(value.substr(kBearer.size())));
  absl::StatusOr<Principal> principal = VerifyToken(audience, secret);
  if (absl::IsUnauthenticated(principal.status()) || absl::IsPermissionDenied(principal.status())) {
    return absl::UnauthenticatedError(
        "the token of this call was revoked; the stream ends. Use a valid token and call again");
  }
  return absl::OkStatus();
}

PolledStreamSettings Backend::WatchSettings(const grpc::ServerContextBase* context) {
  PolledStreamSettings settings;
  settings.poll_interval = options.streams.watch_poll_interval;
  settings.token_recheck = options.streams.token_recheck;
  settings.recheck_token = [this, context] { return RecheckToken(*context, Audience::kTenant); };
  settings.shutting_down = &shutting_down;
  return settings;
}

}  // namespace gantry::server
