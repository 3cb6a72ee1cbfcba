// Backend: the storage a running gantry-server works on (database pool, repositories, blob store)
// plus the per-call authentication results (CallAuth) and the model cache (ModelResolver); built
// once at start (migrations, bootstrap tokens) and taken apart by GantryServer for the services.
#ifndef GANTRY_SERVER_PLATFORM_BACKEND_H_
#define GANTRY_SERVER_PLATFORM_BACKEND_H_

#include <atomic>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/grpc_status.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/server_context.h"
#include "server/platform/auth.h"
#include "server/platform/call_auth.h"
#include "server/platform/job_notifier.h"
#include "server/platform/model_resolver.h"
#include "server/platform/polled_stream.h"
#include "server/platform/server_options.h"
#include "server/platform/tenant_quotas.h"
#include "server/platform/ttl_cache.h"
#include "server/platform/worker_channel_pool.h"
#include "server/platform/worker_credentials.h"
#include "storage/blob_repository.h"
#include "storage/blob_store.h"
#include "storage/cost_repository.h"
#include "storage/database.h"
#include "storage/dataset_repository.h"
#include "storage/job_repository.h"
#include "storage/model_pin_repository.h"
#include "storage/model_repository.h"
#include "storage/pool_repository.h"
#include "storage/study_repository.h"
#include "storage/tenant_limits_repository.h"
#include "storage/tenant_repository.h"
#include "storage/token_repository.h"
#include "storage/web_session_repository.h"
#include "storage/worker_identity_repository.h"
#include "storage/worker_repository.h"

namespace gantry::server {

// Thread-safe: every member is. Owns the storage objects; `auth` is owned by the GantryServer
// (which the Backend must outlive only while calls run). The services see it only as the
// CallAuth and ModelResolver it implements, and through the members GantryServer hands them.
class Backend : public CallAuth, public ModelResolver {
 public:
  // Connects to options.db.dsn, applies migrations (migrations_applied tells how many), opens the
  // blob store under options.data_dir and imports the bootstrap tokens. FAILED_PRECONDITION for a
  // database newer than this binary.
  static absl::StatusOr<std::unique_ptr<Backend>> Create(const ServerOptions& options);

  // Checks a bearer secret for an audience (the AuthInterceptorFactory's TokenVerifier): join
  // tokens for Register, worker and rank credentials for the rest of WorkerService (and
  // ReadDataset), tenant tokens elsewhere. A browser session secret ("gws_...", which only the
  // HTTP API sends, over the in-process channel) stands for its tenant on the tenant audience.
  // Worker secrets this process verified before are still accepted while the database is
  // unavailable, so workers can reconnect through an outage.
  absl::StatusOr<Principal> VerifyToken(Audience audience, const std::string& secret);

  // ModelResolver: ModelRepository::Resolve through a cache of options.model_cache_ttl
  // (histograms left out). Only successes are cached, so a model registered a moment ago resolves
  // at once. ForgetModels after an alias or archive change.
  absl::StatusOr<gantry::v1::ModelVersion> ResolveModel(const std::string& viewer,
                                                        const std::string& ref) override;
  void ForgetModels() override { model_cache_.Clear(); }

  // CallAuth: the principal `auth` found for the call; ForgetTokens after a revocation.
  absl::StatusOr<Principal> PrincipalOf(const grpc::ServerContextBase* context) const override {
    return auth->PrincipalOf(context);
  }
  void ForgetTokens() override { token_cache_.Clear(); }
  // Verifies the call's bearer token again (long-lived streams call it periodically): OK, or
  // UNAUTHENTICATED when it was revoked meanwhile. A database outage is not a revocation (OK).
  absl::Status RecheckToken(const grpc::ServerContextBase& context, Audience audience) override;
  // How a tenant's watch (a PolledStream) of this call waits and ends: options.streams'
  // intervals, its token checked again, shutdown. `context` must outlive the stream.
  PolledStreamSettings WatchSettings(const grpc::ServerContextBase* context) override;

  const ServerOptions options;
  std::unique_ptr<storage::Database> db;
  std::unique_ptr<storage::BlobStore> blobs;
  std::unique_ptr<storage::BlobRepository> blob_refs;  // reference counts, pins, collection
  std::unique_ptr<storage::TenantRepository> tenants;
  std::unique_ptr<storage::TokenRepository> tokens;
  std::unique_ptr<storage::WebSessionRepository> web_sessions;  // the HTTP API's logins
  std::unique_ptr<storage::JobRepository> jobs;
  std::unique_ptr<storage::DatasetRepository> datasets;
  std::unique_ptr<storage::ModelRepository> models;
  std::unique_ptr<storage::ModelPinRepository> model_pins;  // AdminService.LoadModel
  std::unique_ptr<storage::StudyRepository> studies;
  std::unique_ptr<storage::WorkerRepository> workers;
  std::unique_ptr<storage::PoolRepository> pools;  // AdminService pools, the autoscaler
  std::unique_ptr<storage::CostRepository> costs;  // usage per job attempt, cost reports
  std::unique_ptr<storage::TenantLimitsRepository> tenant_limits;
  std::unique_ptr<TenantQuotas> quotas;  // per-tenant limits, streams and shower rate
  JobNotifier job_notifier;              // signalled by every job event this process writes
  std::unique_ptr<storage::WorkerIdentityRepository> identities;
  std::unique_ptr<WorkerCredentials> credentials;
  AuthInterceptorFactory* auth = nullptr;  // set by GantryServer before it accepts calls
  // How the generation router dials workers (TLS with --tls-client-ca, plaintext without). Set by
  // GantryServer::Start before the services are built; read-only afterwards.
  WorkerChannelSettings worker_channels;
  int migrations_applied = 0;
  std::atomic<bool> shutting_down{false};  // streams end when set

 private:
  explicit Backend(ServerOptions options)
      : options(std::move(options)),
        token_cache_(this->options.auth_cache_ttl, 10000),
        model_cache_(this->options.model_cache_ttl, 10000) {}

  TtlCache<Principal> token_cache_;                 // key: sha256 of the secret
  TtlCache<gantry::v1::ModelVersion> model_cache_;  // key: viewer '\n' reference
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_BACKEND_H_
