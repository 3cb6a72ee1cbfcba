// AdminService's pool RPCs.
#include "base/status_macros.h"
#include "server/api/admin_service.h"
#include "server/requests/field_checks.h"
#include "server/requests/pool_requests.h"

namespace gantry::server {

namespace v1 = ::gantry::v1;

namespace {

absl::Status CheckPoolName(const std::string& name) {
  if (name.empty() || name.size() > 63) {
    return checks::Invalid("name", "give the pool's name (gantry admin pools list)");
  }
  return absl::OkStatus();
}

}  // namespace

grpc::Status AdminService::CreatePool(grpc::ServerContext* context,
                                      const v1::CreatePoolRequest* request, v1::Pool* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    RETURN_IF_ERROR(ValidatePool(request->name(), request->spec()));
    ASSIGN_OR_RETURN(*response, pools_.Create(request->name(), request->spec()));
    autoscaler_.Wake();
    return absl::OkStatus();
  });
}

grpc::Status AdminService::UpdatePool(grpc::ServerContext* context,
                                      const v1::UpdatePoolRequest* request, v1::Pool* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    RETURN_IF_ERROR(ValidatePool(request->name(), request->spec()));
    ASSIGN_OR_RETURN(*response, pools_.Update(request->name(), request->spec()));
    *response->mutable_status() = autoscaler_.StatusOf(request->name());
    autoscaler_.Wake();
    return absl::OkStatus();
  });
}

grpc::Status AdminService::DeletePool(grpc::ServerContext* context,
                                      const v1::DeletePoolRequest* request,
                                      v1::DeletePoolResponse*) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    RETURN_IF_ERROR(CheckPoolName(request->name()));
    RETURN_IF_ERROR(pools_.Delete(request->name()));
    autoscaler_.Wake();
    return absl::OkStatus();
  });
}

grpc::Status AdminService::ListPools(grpc::ServerContext* context, const v1::ListPoolsRequest*,
                                     v1::ListPoolsResponse* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<v1::Pool> pools, pools_.List());
    for (v1::Pool& pool : pools) {
      *pool.mutable_status() = autoscaler_.StatusOf(pool.name());
      *response->add_pools() = std::move(pool);
    }
    return absl::OkStatus();
  });
}

grpc::Status AdminService::GetPool(grpc::ServerContext* context, const v1::GetPoolRequest* request,
                                   v1::Pool* response) {
  return auth_.Serve(context, [&](const Principal&) -> absl::Status {
    RETURN_IF_ERROR(CheckPoolName(request->name()));
    ASSIGN_OR_RETURN(*response, pools_.Get(request->name()));
    *response->mutable_status() = autoscaler_.StatusOf(request->name());
    return absl::OkStatus();
  });
}

}  // namespace gantry::server
