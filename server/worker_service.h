// WorkerService: the worker-facing protocol (gantry.v1.WorkerService), authenticated by join
// tokens. Register stores the worker; Connect is its control stream (heartbeats and job messages
// up, handed to the WorkerSessions of the JobCoordinator; assignments and cancellations down);
// UploadCheckpoint / FetchCheckpoint move checkpoints through the blob store with sha256
// verification.
#ifndef GANTRY_SERVER_WORKER_SERVICE_H_
#define GANTRY_SERVER_WORKER_SERVICE_H_

#include "gantry/v1/worker.grpc.pb.h"
#include "server/backend.h"
#include "server/worker_sessions.h"

namespace gantry::server {

// Thread-safe; `backend` and `sessions` must outlive it.
class WorkerService final : public gantry::v1::WorkerService::Service {
 public:
  WorkerService(Backend& backend, WorkerSessions& sessions)
      : backend_(backend), sessions_(sessions) {}

  grpc::Status Register(grpc::ServerContext* context, const gantry::v1::RegisterRequest* request,
                        gantry::v1::RegisterResponse* response) override;
  grpc::Status Connect(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<gantry::v1::ServerMessage,
                                                gantry::v1::WorkerMessage>* stream) override;
  grpc::Status UploadCheckpoint(grpc::ServerContext* context,
                                grpc::ServerReader<gantry::v1::UploadCheckpointRequest>* reader,
                                gantry::v1::UploadCheckpointResponse* response) override;
  grpc::Status FetchCheckpoint(grpc::ServerContext* context,
                               const gantry::v1::FetchCheckpointRequest* request,
                               grpc::ServerWriter<gantry::v1::CheckpointChunk>* writer) override;

 private:
  Backend& backend_;
  WorkerSessions& sessions_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_WORKER_SERVICE_H_
