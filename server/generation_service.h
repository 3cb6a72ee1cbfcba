// GenerationService: validates a Generate request completely (model reference and access,
// conditions against the model's training ranges) and then answers UNIMPLEMENTED until serving
// arrives (issue 5).
#ifndef GANTRY_SERVER_GENERATION_SERVICE_H_
#define GANTRY_SERVER_GENERATION_SERVICE_H_

#include "gantry/v1/generation.grpc.pb.h"
#include "server/backend.h"

namespace gantry::server {

// Thread-safe; `backend` must outlive it.
class GenerationService final : public gantry::v1::GenerationService::Service {
 public:
  explicit GenerationService(Backend& backend) : backend_(backend) {}

  grpc::Status Generate(grpc::ServerContext* context, const gantry::v1::GenerateRequest* request,
                        grpc::ServerWriter<gantry::v1::GenerateChunk>* writer) override;

 private:
  Backend& backend_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_GENERATION_SERVICE_H_
