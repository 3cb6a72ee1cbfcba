// GenerationService: Generate for tenants. Authenticates, validates the request, resolves the
// model reference in the caller's namespace (another tenant's private model is NOT_FOUND), checks
// the conditions against the model's training ranges, draws a seed when none is given, asks the
// GenerationRouter which worker to use and proxies the worker's stream chunk by chunk.
//
// Proxying: the worker call inherits the client's deadline and is cancelled with the client; one
// chunk is read from the worker only after the previous one was handed to the client's stream, so
// the client's flow control reaches the worker and nothing is buffered beyond a chunk. A worker
// that fails with UNAVAILABLE before its first chunk is skipped for the next candidate; any other
// worker error is returned with its code and message. The seed used is sent as initial metadata
// "gantry-seed" (decimal) and the worker's name as "gantry-worker". One log line per call.
#ifndef GANTRY_SERVER_GATEWAY_GENERATION_SERVICE_H_
#define GANTRY_SERVER_GATEWAY_GENERATION_SERVICE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gantry/v1/generation.grpc.pb.h"
#include "gantry/v1/worker.pb.h"
#include "scheduler/generation_router.h"
#include "server/platform/call_auth.h"
#include "server/platform/model_resolver.h"
#include "server/platform/tenant_quotas.h"
#include "server/platform/worker_channel_pool.h"

namespace gantry::server {

// Thread-safe; every reference must outlive it. The tenant's limits, streams and showers come from
// `quotas`; workers are dialled as `worker_channels` say; the client's token is checked again
// every `token_recheck` while the worker streams; chunks stay under `max_message_bytes` (the
// server's message size limit).
class GenerationService final : public gantry::v1::GenerationService::Service {
 public:
  GenerationService(CallAuth& auth, ModelResolver& resolver, TenantQuotas& quotas,
                    scheduler::GenerationRouter& router,
                    const WorkerChannelSettings& worker_channels, absl::Duration token_recheck,
                    int max_message_bytes)
      : auth_(auth),
        resolver_(resolver),
        quotas_(quotas),
        router_(router),
        channels_(worker_channels),
        token_recheck_(token_recheck),
        max_message_bytes_(max_message_bytes) {}

  grpc::Status Generate(grpc::ServerContext* context, const gantry::v1::GenerateRequest* request,
                        grpc::ServerWriter<gantry::v1::GenerateChunk>* writer) override;

 private:
  // What one attempt on one worker did.
  struct Attempt {
    absl::Status status;
    int64_t chunks = 0;
    int64_t showers = 0;
  };

  // `showers_sent` (out): how many showers reached the client.
  absl::Status Route(grpc::ServerContext* context, const gantry::v1::WorkerGenerateRequest& work,
                     int64_t count, grpc::ServerWriter<gantry::v1::GenerateChunk>* writer,
                     std::string* worker_name, int64_t* showers_sent);
  Attempt CallWorker(grpc::ServerContext* context,
                     const scheduler::GenerationRouter::Candidate& worker,
                     const gantry::v1::WorkerGenerateRequest& work, int64_t count,
                     grpc::ServerWriter<gantry::v1::GenerateChunk>* writer);

  // Writes `chunk` to the client, split into several chunks when it is larger than the server's
  // message size limit (max_message_bytes). False once the client is gone.
  bool WriteWithinLimit(const gantry::v1::GenerateChunk& chunk,
                        grpc::ServerWriter<gantry::v1::GenerateChunk>* writer);

  CallAuth& auth_;
  ModelResolver& resolver_;
  TenantQuotas& quotas_;
  scheduler::GenerationRouter& router_;
  WorkerChannelPool channels_;
  const absl::Duration token_recheck_;
  const int max_message_bytes_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_GATEWAY_GENERATION_SERVICE_H_
