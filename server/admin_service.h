// AdminService: tenants, API tokens, worker join tokens and the worker list
// (gantry.v1.AdminService); the auth interceptor lets only admin tenants' tokens through.
#ifndef GANTRY_SERVER_ADMIN_SERVICE_H_
#define GANTRY_SERVER_ADMIN_SERVICE_H_

#include "gantry/v1/admin.grpc.pb.h"
#include "server/backend.h"
#include "server/worker_sessions.h"

namespace gantry::server {

// Thread-safe; `backend` and `sessions` must outlive it.
class AdminService final : public gantry::v1::AdminService::Service {
 public:
  AdminService(Backend& backend, WorkerSessions& sessions)
      : backend_(backend), sessions_(sessions) {}

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

 private:
  absl::Status DescribeLimits(const std::string& tenant, gantry::v1::TenantLimitsInfo* info);

  Backend& backend_;
  WorkerSessions& sessions_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_ADMIN_SERVICE_H_
