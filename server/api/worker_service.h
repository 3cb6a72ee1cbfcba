// WorkerService: the worker-facing protocol (gantry.v1.WorkerService). Register (join token) stores
// the worker and issues its credential, refusing a registered name unless the caller shows that
// worker's credential (or its identity was revoked); every other call takes the worker credential
// (Connect: only for its own worker id) or a rank credential (checkpoints and validation points of
// its own job attempt, while that attempt is live). Connect is its control stream (heartbeats and
// job messages up, job messages stored in order through a WorkerInbox into the WorkerSessions of
// the JobCoordinator and acknowledged once stored; assignments, cancellations and acks down);
// UploadCheckpoint / FetchCheckpoint move checkpoints through the blob store with sha256
// verification; ReportValidation stores a point of a job's validation curve. While PostgreSQL is
// unavailable, workers this process knows keep registering, connecting and heartbeating from memory
// (WorkerRegistry) and their job messages wait.

#ifndef GANTRY_SERVER_API_WORKER_SERVICE_H_
#define GANTRY_SERVER_API_WORKER_SERVICE_H_

#include "gantry/v1/worker.grpc.pb.h"
#include "server/coordinator/worker_registry.h"
#include "server/coordinator/worker_sessions.h"
#include "server/platform/backend.h"

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
  grpc::Status ReportValidation(grpc::ServerContext* context,
                                const gantry::v1::ReportValidationRequest* request,
                                gantry::v1::ReportValidationResponse* response) override;

 private:
  // OK when the caller may register as request.name(): the name is new, or it is the worker
  // `previous_id` (the caller showed that worker's credential), or the worker's identity was
  // revoked and it is silent. FAILED_PRECONDITION while another worker of that name is live
  // (connected to this process, or connected with a heartbeat within the lease in the database);
  // PERMISSION_DENIED while the name's worker holds a valid credential (a restarted daemon shows
  // it from its --credential-file).
  absl::Status MayTakeName(const gantry::v1::RegisterRequest& request,
                           const std::string& previous_id);
  // PERMISSION_DENIED unless the caller may upload a checkpoint of header.job_id: a rank credential
  // of that job and attempt, or a worker credential of a worker any attempt of the job ran on.
  absl::Status MayUpload(const Principal& principal, const gantry::v1::CheckpointHeader& header);
  // The same rule for a report about `job_id` of `attempt` (`field` names the job id in messages).
  absl::Status MayReport(const Principal& principal, const std::string& job_id, int attempt,
                         const std::string& field, const std::string& what);
  // PERMISSION_DENIED unless the caller may read checkpoint `sha256`: a rank credential only its
  // job's checkpoints and the model version the job starts from (spec.initial_model); a worker
  // credential checkpoints of jobs placed on it and registered models' (serving).
  absl::Status MayFetch(const Principal& principal, const std::string& sha256);
  // Writes the heartbeat (and a registration answered from memory) to the database.
  absl::Status StoreHeartbeat(const std::string& worker_id, const gantry::v1::Heartbeat& hb);

  Backend& backend_;
  WorkerSessions& sessions_;
  WorkerRegistry registry_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_API_WORKER_SERVICE_H_
