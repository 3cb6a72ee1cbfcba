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

#include <atomic>
#include <cstdint>

#include "gantry/v1/worker.grpc.pb.h"
#include "server/coordinator/worker_registry.h"
#include "server/coordinator/worker_sessions.h"
#include "server/platform/call_auth.h"
#include "server/platform/server_options.h"
#include "server/platform/worker_credentials.h"
#include "storage/blob_repository.h"
#include "storage/blob_store.h"
#include "storage/job_repository.h"
#include "storage/model_repository.h"
#include "storage/worker_identity_repository.h"
#include "storage/worker_repository.h"

namespace gantry::server {

// Thread-safe; every reference must outlive it. Workers are told `coordinator`'s heartbeat
// interval and lease; checkpoints larger than `max_checkpoint_bytes` are refused; Connect streams
// end once `shutting_down` is set.
class WorkerService final : public gantry::v1::WorkerService::Service {
 public:
  WorkerService(CallAuth& auth, storage::WorkerRepository& workers,
                storage::WorkerIdentityRepository& identities, WorkerCredentials& credentials,
                storage::JobRepository& jobs, storage::ModelRepository& models,
                storage::BlobStore& blobs, storage::BlobRepository& blob_refs,
                WorkerSessions& sessions, const CoordinatorOptions& coordinator,
                int64_t max_checkpoint_bytes, const std::atomic<bool>& shutting_down)
      : auth_(auth),
        workers_(workers),
        identities_(identities),
        credentials_(credentials),
        jobs_(jobs),
        models_(models),
        blobs_(blobs),
        blob_refs_(blob_refs),
        sessions_(sessions),
        coordinator_(coordinator),
        max_checkpoint_bytes_(max_checkpoint_bytes),
        shutting_down_(shutting_down) {}

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

  CallAuth& auth_;
  storage::WorkerRepository& workers_;
  storage::WorkerIdentityRepository& identities_;
  WorkerCredentials& credentials_;
  storage::JobRepository& jobs_;
  storage::ModelRepository& models_;  // a rank's initial model (MayFetch)
  storage::BlobStore& blobs_;
  storage::BlobRepository& blob_refs_;  // pins an upload's blob until its checkpoint row exists
  WorkerSessions& sessions_;
  const CoordinatorOptions coordinator_;  // heartbeat_interval_ms and lease_timeout_ms
  const int64_t max_checkpoint_bytes_;
  const std::atomic<bool>& shutting_down_;
  WorkerRegistry registry_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_API_WORKER_SERVICE_H_
