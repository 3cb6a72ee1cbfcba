#include "server/generation_service.h"

#include "absl/strings/str_cat.h"
#include "gantry/base/status_macros.h"
#include "server/validation.h"

namespace gantry::server {

namespace v1 = ::gantry::v1;

grpc::Status GenerationService::Generate(grpc::ServerContext* context,
                                         const v1::GenerateRequest* request,
                                         grpc::ServerWriter<v1::GenerateChunk>* /*writer*/) {
  return backend_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateGenerateRequest(*request));
    absl::StatusOr<v1::ModelVersion> model = backend_.models->Resolve(p.tenant, request->model());
    if (!model.ok()) {
      return absl::Status(model.status().code(), absl::StrCat("model: ", model.status().message()));
    }
    RETURN_IF_ERROR(ValidateGenerateForModel(*request, *model));
    return absl::UnimplementedError(
        absl::StrCat("generation serving arrives with issue 5; the request for ", model->name(),
                     ":", model->version(), " is valid"));
  });
}

}  // namespace gantry::server
