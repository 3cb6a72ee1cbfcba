// WorkerGenerationService: the worker side of gantry.v1.WorkerGenerationService. Thin: checks the
// caller's secret, gets the model from the ModelCache (loading it if needed), queues the request in
// the model's DynamicBatcher and writes each chunk as soon as it is produced. Honours the call's
// deadline (DEADLINE_EXCEEDED) and cancellation (the request leaves the batcher). Export runs the
// injected ModelExporter, one export at a time per worker, and streams the file. LoadModel and
// UnloadModel pin and unpin models (AdminService.LoadModel through gantry-server).
#ifndef GANTRY_WORKERS_SERVING_WORKER_GENERATION_SERVICE_H_
#define GANTRY_WORKERS_SERVING_WORKER_GENERATION_SERVICE_H_

#include <atomic>
#include <string>

#include "absl/synchronization/mutex.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "workers/serving/model_cache.h"
#include "workers/serving/model_exporter.h"

namespace gantry::serving {

// `settings` over `defaults`; INVALID_ARGUMENT naming the field out of range.
absl::StatusOr<BatcherOptions> BatcherOptionsFrom(const gantry::v1::BatchingSettings& settings,
                                                  const BatcherOptions& defaults);
// Every field of `options` as BatchingSettings.
gantry::v1::BatchingSettings SettingsOf(const BatcherOptions& options);

class WorkerGenerationService final : public gantry::v1::WorkerGenerationService::Service {
 public:
  // Bytes per data chunk of Export.
  static constexpr int64_t kExportChunkBytes = int64_t{1} << 20;

  // Callers must send `authorization: Bearer <secret>`. `cache` must outlive the service.
  // `exporter` may be null (Export is then UNIMPLEMENTED).
  WorkerGenerationService(std::string secret, ModelCache* cache, ModelExporter exporter = nullptr);

  // Chunks carry packed little-endian float32 showers with shape [n, x, y, z] (x, y, z = the
  // model's grid), one Condition per shower (theta 0 for fixed-angle models), the offset of the
  // first shower and the request's model_ref. Codes: UNAUTHENTICATED (secret), INVALID_ARGUMENT /
  // FAILED_PRECONDITION (GenerationPlan; BF16 where this worker cannot compute in bfloat16), the
  // model loader's errors (e.g. NOT_FOUND, DATA_LOSS), RESOURCE_EXHAUSTED (queue or model cache
  // full), DEADLINE_EXCEEDED, CANCELLED.
  grpc::Status Generate(grpc::ServerContext* context,
                        const gantry::v1::WorkerGenerateRequest* request,
                        grpc::ServerWriter<gantry::v1::GenerateChunk>* writer) override;

  // The metadata chunk (size, sha256, format, inputs, outputs, model_ref and checkpoint_sha256 of
  // the request), then the file in chunks of kExportChunkBytes with their offsets. Codes:
  // UNAUTHENTICATED, INVALID_ARGUMENT (format not ONNX or PYTORCH; not a sha256), the exporter's
  // errors (fetching, verifying or reading the checkpoint), CANCELLED.
  grpc::Status Export(grpc::ServerContext* context, const gantry::v1::WorkerExportRequest* request,
                      grpc::ServerWriter<gantry::v1::ExportModelChunk>* writer) override;

  // Generate and Export calls being served now.

  // Pins the model in the cache with the request's batching settings (unset: the daemon's flags)
  // and answers once its warm-up batch ran. Codes: UNAUTHENTICATED, INVALID_ARGUMENT (a setting out
  // of range, naming it), ModelCache::Pin's.
  grpc::Status LoadModel(grpc::ServerContext* context,
                         const gantry::v1::WorkerLoadModelRequest* request,
                         gantry::v1::WorkerLoadModelResponse* response) override;
  // Unpins and unloads (after the requests in flight). UNAUTHENTICATED; OK when not loaded.
  grpc::Status UnloadModel(grpc::ServerContext* context,
                           const gantry::v1::WorkerUnloadModelRequest* request,
                           gantry::v1::WorkerUnloadModelResponse* response) override;

  // Generate calls being served now.
  int active_requests() const { return active_.load(); }

 private:
  bool Authorized(const grpc::ServerContext& context) const;
  grpc::Status Unauthenticated() const;

  const std::string expected_authorization_;
  ModelCache* const cache_;
  const ModelExporter exporter_;
  // One export at a time: each holds a generator and its file in memory.
  absl::Mutex export_mu_;
  std::atomic<int> active_{0};
};

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_WORKER_GENERATION_SERVICE_H_
