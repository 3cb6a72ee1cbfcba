// ModelExportProxy: the server side of CatalogService.ExportModel. Asks the GenerationRouter for a
// worker able to serve (those with the model loaded first), calls its
// WorkerGenerationService.Export and forwards the stream to the client, treating the worker's bytes
// as hostile:
//  - the first message must be the metadata, of the requested format, declaring a size of at most
//    MaxExportBytes(checkpoint size) and a sha256; its inputs and outputs are bounded in number and
//    length, and model_ref and checkpoint_sha256 are the server's own;
//  - every later message is data of at most kMaxChunkBytes at the next offset, never past the
//    declared size; the server hashes what arrives;
//  - the last data chunk is held back until the worker's stream ended OK with exactly the declared
//    size and sha256 (else DATA_LOSS), so a client never receives a complete file that was not
//    verified. Messages from workers are limited to kMaxChunkBytes + 64 KiB on this pool's
//    channels.
// A worker UNAVAILABLE before its first message is replaced by the next candidate; other worker
// errors keep their code. The worker call inherits the client's deadline and cancellation. The
// client's token is checked again every options.streams.token_recheck while data flows and before
// the last chunk (UNAUTHENTICATED once revoked, the worker's call cancelled).
#ifndef GANTRY_SERVER_GATEWAY_MODEL_EXPORT_PROXY_H_
#define GANTRY_SERVER_GATEWAY_MODEL_EXPORT_PROXY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "gantry/v1/worker.pb.h"
#include "grpcpp/server_context.h"
#include "scheduler/generation_router.h"
#include "server/platform/call_auth.h"
#include "server/platform/worker_channel_pool.h"

namespace gantry::server {

// Thread-safe; `auth` and `router` must outlive it. Workers are dialled as `worker_channels` say;
// the client's token is checked again through `auth` every `token_recheck`.
class ModelExportProxy {
 public:
  // Largest data message a worker may send.
  static constexpr int64_t kMaxChunkBytes = int64_t{1} << 20;

  ModelExportProxy(CallAuth& auth, scheduler::GenerationRouter& router,
                   const WorkerChannelSettings& worker_channels, absl::Duration token_recheck);

  // Largest export accepted for a checkpoint of `checkpoint_bytes`: 2x its size + 16 MiB (the
  // export holds the generator's weights only, a subset of the checkpoint's tensors).
  static int64_t MaxExportBytes(int64_t checkpoint_bytes);

  // Exports `model` (resolved and visible to the caller) as `format` to `writer`. `worker_name`
  // (out) names the worker that answered last. Errors: UNAVAILABLE when no worker serves or none
  // could be reached; the worker's errors with its name; INTERNAL / DATA_LOSS when the worker's
  // stream breaks the rules above; CANCELLED when the client went away.
  absl::Status Export(grpc::ServerContext* context, const gantry::v1::ModelVersion& model,
                      gantry::v1::ExportFormat format, gantry::v1::ExportProfile profile,
                      grpc::ServerWriter<gantry::v1::ExportModelChunk>* writer,
                      std::string* worker_name);

 private:
  // What one attempt on one worker did.
  struct Attempt {
    absl::Status status;
    int64_t messages = 0;  // received from the worker
  };

  Attempt CallWorker(grpc::ServerContext* context,
                     const scheduler::GenerationRouter::Candidate& worker,
                     const gantry::v1::WorkerExportRequest& work,
                     grpc::ServerWriter<gantry::v1::ExportModelChunk>* writer);

  CallAuth& auth_;
  scheduler::GenerationRouter& router_;
  WorkerChannelPool channels_;
  const absl::Duration token_recheck_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_GATEWAY_MODEL_EXPORT_PROXY_H_
