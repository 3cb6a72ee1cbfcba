// CatalogService: the model registry over ModelRepository (gantry.v1.CatalogService). Versions are
// registered by training jobs (issue 4); this service lists, resolves, aliases, tags and archives
// them.
#ifndef GANTRY_SERVER_CATALOG_SERVICE_H_
#define GANTRY_SERVER_CATALOG_SERVICE_H_

#include "gantry/v1/catalog.grpc.pb.h"
#include "server/backend.h"

namespace gantry::server {

// Thread-safe; `backend` must outlive it.
class CatalogService final : public gantry::v1::CatalogService::Service {
 public:
  explicit CatalogService(Backend& backend) : backend_(backend) {}

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
  grpc::Status ArchiveModel(grpc::ServerContext* context,
                            const gantry::v1::ArchiveModelRequest* request,
                            gantry::v1::ModelVersion* response) override;

 private:
  Backend& backend_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_CATALOG_SERVICE_H_
