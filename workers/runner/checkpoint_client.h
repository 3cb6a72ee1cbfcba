// CheckpointClient: moves checkpoint files between a worker and gantry-server through
// WorkerService.UploadCheckpoint / FetchCheckpoint, and reports their validation
// (ReportValidation), authenticated by the worker or rank credential.
// Torch-free; thread-safe (each call has its own gRPC call).
#ifndef GANTRY_WORKERS_RUNNER_CHECKPOINT_CLIENT_H_
#define GANTRY_WORKERS_RUNNER_CHECKPOINT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "grpcpp/security/credentials.h"

namespace gantry::runner {

struct UploadedCheckpoint {
  std::string sha256;
  int64_t size_bytes = 0;
};

// What uploading checkpoints and reporting their validation needs of the server
// (CheckpointPublisher); CheckpointClient in production, a fake in tests.
class CheckpointTransport {
 public:
  virtual ~CheckpointTransport() = default;
  virtual absl::StatusOr<UploadedCheckpoint> Upload(const std::string& job_id, int epoch,
                                                    int64_t step, const std::string& path,
                                                    int attempt, int rank,
                                                    std::optional<double> fom) = 0;
  virtual absl::Status ReportValidation(const std::string& job_id, int attempt, int rank,
                                        const gantry::v1::ValidationPoint& point) = 0;
};

class CheckpointClient : public CheckpointTransport {
 public:
  // `server` is host:port; `token` the join token (may be empty for tests of refusals);
  // `credentials` of the channel (null = plaintext; gantry::ChannelCredentialsFor for TLS).
  CheckpointClient(const std::string& server, std::string token,
                   absl::Duration timeout = absl::Minutes(10),
                   std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

  // Hashes `path`, then streams a header {job_id, epoch, step, sha256, size, attempt, rank} and
  // 1 MiB chunks. The server verifies the sha256 and records a CheckpointSaved event for the job
  // (FAILED_PRECONDITION for an attempt older than the job's). Errors carry the gRPC code and name
  // the server and the file. `fom`, when set, is the checkpoint's validation figure of merit
  // (checkpoint_policy.keep_best).
  absl::StatusOr<UploadedCheckpoint> Upload(const std::string& job_id, int epoch, int64_t step,
                                            const std::string& path, int attempt = 0, int rank = 0,
                                            std::optional<double> fom = std::nullopt) override;

  // Reports the validation of the checkpoint at point.step (metrics and histograms) for the job
  // attempt; one unary call with a deadline of min(timeout, 30 s). Errors carry the gRPC code.
  absl::Status ReportValidation(const std::string& job_id, int attempt, int rank,
                                const gantry::v1::ValidationPoint& point) override;

  // Downloads checkpoint `sha256` to `path` (via path.part + rename) and verifies its hash;
  // DATA_LOSS on a mismatch.
  absl::StatusOr<UploadedCheckpoint> Fetch(const std::string& sha256, const std::string& path);

 private:
  std::unique_ptr<grpc::ClientContext> NewContext() const;

  std::string server_;
  std::string token_;
  absl::Duration timeout_;
  std::unique_ptr<gantry::v1::WorkerService::Stub> stub_;
};

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_CHECKPOINT_CLIENT_H_
