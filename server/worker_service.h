// WorkerService: the worker-facing protocol (gantry.v1.WorkerService), authenticated by join
// tokens. Register stores the worker; Connect is its control stream (heartbeats and job messages
// up, job messages stored in order through a WorkerInbox into the WorkerSessions of the
// JobCoordinator and acknowledged once stored; assignments, cancellations and acks down);
// UploadCheckpoint / FetchCheckpoint move checkpoints through the blob store with sha256
// verification. While PostgreSQL is unavailable, workers this process knows keep registering,
// connecting and heartbeating from memory (WorkerRegistry) and their job messages wait.

#ifndef GANTRY_SERVER_WORKER_SERVICE_H_
#define GANTRY_SERVER_WORKER_SERVICE_H_

#include "gantry/v1/worker.grpc.pb.h"
#include "server/backend.h"
#include "server/worker_registry.h"
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
  // Writes the heartbeat (and a registration answered from memory) to the database.
  absl::Status StoreHeartbeat(const std::string& worker_id, const gantry::v1::Heartbeat& hb);

  Backend& backend_;
  WorkerSessions& sessions_;
  WorkerRegistry registry_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_WORKER_SERVICE_H_
