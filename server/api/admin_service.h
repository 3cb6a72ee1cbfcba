// AdminService: tenants, API tokens, worker join tokens and the worker list
// (gantry.v1.AdminService); the auth interceptor lets only admin tenants' tokens through.
#ifndef GANTRY_SERVER_API_ADMIN_SERVICE_H_
#define GANTRY_SERVER_API_ADMIN_SERVICE_H_

#include "gantry/v1/admin.grpc.pb.h"
#include "server/coordinator/worker_sessions.h"
#include "server/gateway/model_pinner.h"
#include "server/platform/call_auth.h"
#include "server/platform/model_resolver.h"
#include "server/platform/tenant_quotas.h"
#include "server/platform/worker_credentials.h"
#include "server/pools/pool_autoscaler.h"
#include "storage/cost_repository.h"
#include "storage/model_repository.h"
#include "storage/pool_repository.h"
#include "storage/tenant_limits_repository.h"
#include "storage/tenant_repository.h"
#include "storage/token_repository.h"
#include "storage/worker_identity_repository.h"
#include "storage/worker_repository.h"

namespace gantry::server {

// Thread-safe; every reference must outlive it. Token revocations clear `auth`'s token cache;
// LoadModel and UnloadModel resolve through `resolver`. The pool RPCs live in
// admin_service_pools.cc.
class AdminService final : public gantry::v1::AdminService::Service {
 public:
  AdminService(CallAuth& auth, ModelResolver& resolver, storage::TenantRepository& tenants,
               storage::TokenRepository& tokens, storage::WorkerIdentityRepository& identities,
               WorkerCredentials& credentials, storage::WorkerRepository& workers,
               storage::ModelRepository& models, storage::TenantLimitsRepository& tenant_limits,
               storage::CostRepository& costs, storage::PoolRepository& pools, TenantQuotas& quotas,
               WorkerSessions& sessions, ModelPinner& pinner, PoolAutoscaler& autoscaler)
      : auth_(auth),
        resolver_(resolver),
        tenants_(tenants),
        tokens_(tokens),
        identities_(identities),
        credentials_(credentials),
        workers_(workers),
        models_(models),
        tenant_limits_(tenant_limits),
        costs_(costs),
        pools_(pools),
        quotas_(quotas),
        sessions_(sessions),
        pinner_(pinner),
        autoscaler_(autoscaler) {}

  grpc::Status CreateTenant(grpc::ServerContext* context,
                            const gantry::v1::CreateTenantRequest* request,
                            gantry::v1::Tenant* response) override;
  grpc::Status ListTenants(grpc::ServerContext* context,
                           const gantry::v1::ListTenantsRequest* request,
                           gantry::v1::ListTenantsResponse* response) override;
  grpc::Status CreateToken(grpc::ServerContext* context,
                           const gantry::v1::CreateTokenRequest* request,
                           gantry::v1::CreateTokenResponse* response) override;
  grpc::Status RevokeToken(grpc::ServerContext* context,
                           const gantry::v1::RevokeTokenRequest* request,
                           gantry::v1::RevokeTokenResponse* response) override;
  grpc::Status CreateJoinToken(grpc::ServerContext* context,
                               const gantry::v1::CreateJoinTokenRequest* request,
                               gantry::v1::CreateTokenResponse* response) override;
  grpc::Status ListJoinTokens(grpc::ServerContext* context,
                              const gantry::v1::ListJoinTokensRequest* request,
                              gantry::v1::ListJoinTokensResponse* response) override;
  grpc::Status RevokeJoinToken(grpc::ServerContext* context,
                               const gantry::v1::RevokeJoinTokenRequest* request,
                               gantry::v1::RevokeJoinTokenResponse* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context,
                           const gantry::v1::ListWorkersRequest* request,
                           gantry::v1::ListWorkersResponse* response) override;
  // Drains or undrains a worker by name or id (stored, so it survives restarts of the server and
  // of the worker); NOT_FOUND for an unknown worker.
  grpc::Status DrainWorker(grpc::ServerContext* context,
                           const gantry::v1::DrainWorkerRequest* request,
                           gantry::v1::WorkerInfo* response) override;
  // Stores a tenant's limit overrides (INVALID_ARGUMENT for a negative value, NOT_FOUND for an
  // unknown tenant) and answers what GetTenantLimits would.
  grpc::Status SetTenantLimits(grpc::ServerContext* context,
                               const gantry::v1::SetTenantLimitsRequest* request,
                               gantry::v1::TenantLimitsInfo* response) override;
  // A tenant's stored overrides, the limits enforced and its stored bytes and active jobs.
  grpc::Status GetTenantLimits(grpc::ServerContext* context,
                               const gantry::v1::GetTenantLimitsRequest* request,
                               gantry::v1::TenantLimitsInfo* response) override;
  // Pins a model version ("owner/name:version" of any owner, or a reference the admin tenant
  // sees; NOT_FOUND otherwise) on serving workers
  // with its batching settings and answers once each target loaded it and ran its warm-up batch
  // (or failed: the outcome says why). INVALID_ARGUMENT for bad settings (ValidateLoadModel).
  grpc::Status LoadModel(grpc::ServerContext* context, const gantry::v1::LoadModelRequest* request,
                         gantry::v1::LoadModelResponse* response) override;
  // Forgets the pin and unloads it from the workers; NOT_FOUND when it is not pinned.
  grpc::Status UnloadModel(grpc::ServerContext* context,
                           const gantry::v1::UnloadModelRequest* request,
                           gantry::v1::UnloadModelResponse* response) override;
  // Pools: the spec checked by ValidatePool, stored, and the autoscaler woken; answers carry the
  // status the autoscaler observes.
  grpc::Status CreatePool(grpc::ServerContext* context,
                          const gantry::v1::CreatePoolRequest* request,
                          gantry::v1::Pool* response) override;
  grpc::Status UpdatePool(grpc::ServerContext* context,
                          const gantry::v1::UpdatePoolRequest* request,
                          gantry::v1::Pool* response) override;
  grpc::Status DeletePool(grpc::ServerContext* context,
                          const gantry::v1::DeletePoolRequest* request,
                          gantry::v1::DeletePoolResponse* response) override;
  grpc::Status ListPools(grpc::ServerContext* context, const gantry::v1::ListPoolsRequest* request,
                         gantry::v1::ListPoolsResponse* response) override;
  grpc::Status GetPool(grpc::ServerContext* context, const gantry::v1::GetPoolRequest* request,
                       gantry::v1::Pool* response) override;

 private:
  absl::StatusOr<gantry::v1::ModelVersion> ResolveForAdmin(const std::string& tenant,
                                                           const std::string& ref);
  absl::Status DescribeLimits(const std::string& tenant, gantry::v1::TenantLimitsInfo* info);

  CallAuth& auth_;
  ModelResolver& resolver_;
  storage::TenantRepository& tenants_;
  storage::TokenRepository& tokens_;  // API and join tokens
  storage::WorkerIdentityRepository& identities_;
  WorkerCredentials& credentials_;
  storage::WorkerRepository& workers_;
  storage::ModelRepository& models_;  // the versions of the workers' loaded checkpoints
  storage::TenantLimitsRepository& tenant_limits_;
  storage::CostRepository& costs_;  // monthly budgets
  storage::PoolRepository& pools_;
  TenantQuotas& quotas_;
  WorkerSessions& sessions_;
  ModelPinner& pinner_;
  PoolAutoscaler& autoscaler_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_API_ADMIN_SERVICE_H_
