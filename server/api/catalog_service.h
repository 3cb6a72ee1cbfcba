// CatalogService: the model registry over ModelRepository (gantry.v1.CatalogService). Versions are
// registered by training jobs; this service lists, resolves, aliases, tags, updates and archives
// them, and exports them through a worker (ModelExportProxy).
#ifndef GANTRY_SERVER_API_CATALOG_SERVICE_H_
#define GANTRY_SERVER_API_CATALOG_SERVICE_H_

#include "gantry/v1/catalog.grpc.pb.h"
#include "scheduler/generation_router.h"
#include "server/coordinator/worker_sessions.h"
#include "server/gateway/model_export_proxy.h"
#include "server/platform/call_auth.h"
#include "server/platform/model_resolver.h"
#include "server/platform/tenant_quotas.h"
#include "storage/job_repository.h"
#include "storage/model_repository.h"

namespace gantry::server {

// Thread-safe; every reference (and `sessions`) must outlive it. GetModel fills the version's
// serving readiness from the workers' latest heartbeats (`sessions`) and the router's count of
// serving workers; without sessions (null) readiness is left empty. Changes of aliases, visibility
// and archiving clear `resolver`'s cache. ExportModel resolves through `resolver`, takes one of the
// tenant's streams (`quotas`) and goes through `exports` to the router's serving workers.
class CatalogService final : public gantry::v1::CatalogService::Service {
 public:
  CatalogService(CallAuth& auth, ModelResolver& resolver, storage::ModelRepository& models,
                 storage::JobRepository& jobs, TenantQuotas& quotas, const WorkerSessions* sessions,
                 const scheduler::GenerationRouter& router, ModelExportProxy& exports)
      : auth_(auth),
        resolver_(resolver),
        models_(models),
        jobs_(jobs),
        quotas_(quotas),
        sessions_(sessions),
        router_(&router),
        exports_(exports) {}

  grpc::Status ListModels(grpc::ServerContext* context,
                          const gantry::v1::ListModelsRequest* request,
                          gantry::v1::ListModelsResponse* response) override;
  grpc::Status GetModel(grpc::ServerContext* context, const gantry::v1::GetModelRequest* request,
                        gantry::v1::ModelVersion* response) override;
  grpc::Status SetAlias(grpc::ServerContext* context, const gantry::v1::SetAliasRequest* request,
                        gantry::v1::ModelVersion* response) override;
  grpc::Status DeleteAlias(grpc::ServerContext* context,
                           const gantry::v1::DeleteAliasRequest* request,
                           gantry::v1::DeleteAliasResponse* response) override;
  grpc::Status SetTags(grpc::ServerContext* context, const gantry::v1::SetTagsRequest* request,
                       gantry::v1::ModelVersion* response) override;
  // Applies the fields update_mask names (description, visibility, tags) to a version; owner only.
  grpc::Status UpdateModel(grpc::ServerContext* context,
                           const gantry::v1::UpdateModelRequest* request,
                           gantry::v1::ModelVersion* response) override;
  grpc::Status ArchiveModel(grpc::ServerContext* context,
                            const gantry::v1::ArchiveModelRequest* request,
                            gantry::v1::ModelVersion* response) override;
  // Owner or public versions (others NOT_FOUND); INVALID_ARGUMENT for a bad reference or format;
  // then ModelExportProxy::Export. One log line per call.
  grpc::Status ExportModel(grpc::ServerContext* context,
                           const gantry::v1::ExportModelRequest* request,
                           grpc::ServerWriter<gantry::v1::ExportModelChunk>* writer) override;

 private:
  // Where `model`'s checkpoint is loaded, from the latest heartbeats.
  void FillReadiness(gantry::v1::ModelVersion* model) const;

  CallAuth& auth_;
  ModelResolver& resolver_;
  storage::ModelRepository& models_;
  storage::JobRepository& jobs_;
  TenantQuotas& quotas_;
  const WorkerSessions* const sessions_;  // not owned; may be null
  const scheduler::GenerationRouter* const router_;  // not owned
  ModelExportProxy& exports_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_API_CATALOG_SERVICE_H_
