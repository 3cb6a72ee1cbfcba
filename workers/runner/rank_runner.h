// RankRunner: one rank of a data-parallel training job, from its Assignment to its exit:
// materialise the dataset, set the hold-out aside, resume from the job's latest checkpoint when the
// assignment says so, join the process group, train with progress and checkpoints (rank 0), then
// validate against the held-out Monte Carlo and report the JobResult (rank 0). A
// checkpoint-and-stop request (SIGUSR1 from the daemon) makes every rank save and upload a
// checkpoint at the next step boundary and end with the Preempted exit code. Everything it reports
// goes through an injected MessageSink (the control pipe to the worker daemon in production, a
// vector in tests).
#ifndef GANTRY_WORKERS_RUNNER_RANK_RUNNER_H_
#define GANTRY_WORKERS_RUNNER_RANK_RUNNER_H_

#include <c10/core/Device.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/file_roots.h"
#include "base/tls_config.h"
#include "gantry/v1/worker.pb.h"
#include "showers/shower_file_reader.h"
#include "showers/shower_set.h"
#include "workers/gan/shower_generator.h"
#include "workers/gan/trainer.h"
#include "workers/runner/checkpoint_client.h"
#include "workers/runner/checkpoint_verifier.h"
#include "workers/runner/dataset_source.h"
#include "workers/runner/holdout_split.h"
#include "workers/runner/precision_check.h"
#include "workers/runner/rank_metrics_reporter.h"
#include "workers/runner/rank_plan.h"
#include "workers/runner/rank_validation.h"

namespace gantry::distributed {
class Communicator;
class DataParallel;
}  // namespace gantry::distributed

namespace gantry::runner {

struct RankRunnerOptions {
  std::string server;     // gantry-server host:port (datasets, checkpoints)
  std::string token;      // the worker join token
  std::string cache_dir;  // dataset cache
  // The dataset cache evicts least-recently-used entries down to this after a fill; 0 = no limit.
  int64_t cache_max_bytes = 0;
  std::string work_dir;  // checkpoints and scratch files of this rank
  // Where file:// datasets may be read from (the daemon's --file-roots); none by default.
  FileRoots file_roots;
  // Resume and initial checkpoints fetched from the server are read once in a sandboxed
  // `gantry-worker verify-checkpoint` child before this process loads them.
  CheckpointVerifierOptions verify_checkpoints;
  // Gloo's bind address on ranks != 0 (the worker's advertise host); empty = the local address
  // that routes to the rendezvous host (127.0.0.1 for a loopback rendezvous).
  std::string bind_host;
  // Set from a signal handler: the rank stops at the next step boundary with CANCELLED.
  const std::atomic<bool>* stop = nullptr;
  // Set from a signal handler (SIGUSR1): checkpoint at the next step boundary, upload, and end with
  // kExitPreempted (before training: end at once, without a checkpoint).
  const std::atomic<bool>* checkpoint_and_stop = nullptr;
  // Gloo collective and rendezvous timeout when the assignment has collective_timeout_ms 0.
  absl::Duration default_collective_timeout = absl::Minutes(2);
  // How long the upload of the final (and of a preemption) checkpoint retries UNAVAILABLE.
  absl::Duration final_upload_retry = absl::Seconds(60);
  absl::Duration progress_interval = absl::Seconds(2);
  // Test and benchmark hook (not part of the job spec): at most this many steps per epoch.
  int64_t max_steps_per_epoch = 0;
  // Channels to the server: TLS when it trusts a CA (mutual TLS when it has a certificate).
  TlsConfig tls;
  // The rank's device (workers/gan/device.h): training, validation generation and, on a cuda
  // device, NCCL instead of Gloo.
  c10::Device device = c10::Device(c10::kCPU);
};

// Receives every message the rank reports. Called from the training thread and the progress
// thread, never concurrently. A non-OK status (the daemon went away) stops the rank.
using MessageSink = std::function<absl::Status(const gantry::v1::WorkerMessage&)>;

class RankRunner {
 public:
  RankRunner(RankPlan plan, RankRunnerOptions options, MessageSink sink);
  ~RankRunner();
  RankRunner(const RankRunner&) = delete;
  RankRunner& operator=(const RankRunner&) = delete;

  // Runs the rank to the end. OK after a successful job (rank 0 has sent JobResult{success}),
  // CANCELLED when stopped (with the kExitPreempted failure kind after a checkpoint-and-stop),
  // otherwise the failure, already reported (an ERROR log line, and on rank 0 a
  // JobResult{success=false, exit_code}). gantry::RankExitCodeFor(status) is the process's exit
  // code: failures whose kind is known are marked (WithExitCode): rendezvous, peer lost, collective
  // timeout, dataset, server unreachable.
  absl::Status Run();

 private:
  absl::Status RunInner();
  // The phases of RunInner, in order.
  void RecordHyperParameters();
  DatasetSourceOptions SourceOptions() const;
  void LogDataset(const MaterializedDataset& dataset, const showers::ShowerFileReader& reader,
                  const std::string& particle, double seconds);
  absl::Status CheckDatasetFitsModel(const showers::ShowerFileReader& reader) const;
  void RecordDataset(const MaterializedDataset& dataset, const std::string& particle);
  // The hold-out split (identical on every rank); rank 0 with validation reads the held-out events
  // into validation_.
  absl::StatusOr<HoldoutSplit> SplitAndReadHoldout(const showers::ShowerFileReader& reader,
                                                   const std::string& particle);
  absl::StatusOr<std::unique_ptr<gan::BatchSource>> StreamTrainingEvents(
      std::shared_ptr<const showers::ShowerFileReader> reader, const std::string& particle,
      const std::string& local_path);
  absl::Status JoinProcessGroup(gan::Trainer& trainer,
                                std::unique_ptr<distributed::Communicator>* communicator,
                                std::unique_ptr<distributed::DataParallel>* data_parallel);
  absl::Status StartRunning();
  absl::Status FinishJob(gan::Trainer& trainer);
  absl::StatusOr<std::unique_ptr<gan::Trainer>> BuildTrainer(
      std::unique_ptr<gan::BatchSource> batches);
  gan::TrainerOptions TrainerOptionsForPlan() const;
  // Fetches `sha256` into the work dir as `file_name`; errors name `field`.
  absl::StatusOr<std::string> FetchCheckpoint(const std::string& field, const std::string& sha256,
                                              const std::string& file_name);
  absl::Status TrainLoop(gan::Trainer& trainer);
  // Whether this step boundary is where the ranks checkpoint and stop: this rank's flag, agreed
  // across the ranks (one-element all-reduce) so that all stop at the same step.
  absl::StatusOr<bool> AgreeOnCheckpointAndStop();
  // Whether a periodic checkpoint is due after the step that just ended.
  bool PeriodicCheckpointDue(const gan::Trainer& trainer, int64_t epoch_before) const;
  // Writes the checkpoint file now (the snapshot) and uploads it: in the background (periodic; a
  // failure is logged) or synchronously (final / preemption; the error is returned). Waits for
  // the previous upload first: at most one is in flight.
  // `retry_for` bounds the retries of UNAVAILABLE (zero: 15 s periodic, final_upload_retry final).
  // `fom` is sent with the checkpoint (keep_best: its validation figure of merit); `point`, when
  // set, is reported (ReportPoint) after the upload, whatever its outcome.
  absl::Status SaveAndUpload(gan::Trainer& trainer, bool final_checkpoint,
                             absl::Duration retry_for = absl::ZeroDuration(),
                             std::optional<double> fom = std::nullopt,
                             std::optional<gantry::v1::ValidationPoint> point = std::nullopt);
  // Validates the current generator on the hold-out (as at the end of training) for the periodic
  // checkpoint about to be saved: its point of the validation curve. A failed validation never
  // fails the job: it is logged as a warning and there is no point.
  std::optional<gantry::v1::ValidationPoint> ValidateCheckpoint(gan::Trainer& trainer);
  // The point of a validation `Validate` wrote into `validated`: its finite metrics (the others
  // are logged and left out) and its histograms up to kMaxPointHistogramBytes.
  gantry::v1::ValidationPoint PointOf(const gantry::v1::JobResult& validated, int epoch,
                                      int64_t step);
  // Sends `point` to the server (WorkerService.ReportValidation), retrying UNAVAILABLE for up to
  // 15 s; a failure is logged as a warning (the curve misses the point, the job goes on).
  void ReportPoint(const gantry::v1::ValidationPoint& point);
  absl::Status CheckpointAndStop(gan::Trainer& trainer);
  // Uploads with retries of UNAVAILABLE for up to `retry_for`; records the upload on success.
  absl::Status UploadCheckpointFile(const std::string& path, int epoch, int64_t step,
                                    absl::Duration retry_for,
                                    std::optional<double> fom = std::nullopt);
  void WaitForUpload();
  // The trained generator validated (ValidateWith).
  absl::Status Validate(gan::Trainer& trainer, gantry::v1::JobResult* result,
                        bool final_validation);
  // spec.validation.leave_out: drops the band's events from `train`. INVALID_ARGUMENT when the
  // band does not lie inside the dataset's energies or holds every training event.
  absl::Status LeaveOutBand(const showers::ShowerFileReader& reader,
                            std::vector<int64_t>* train);
  // A baseline-* job (plan_.baseline), after the dataset: fits the baseline to the training
  // events, uploads its checkpoint, validates it and reports the result. No optimiser step.
  absl::Status RunBaseline(const showers::ShowerFileReader& reader, const std::string& particle);

  absl::Status Send(const gantry::v1::WorkerMessage& message);
  void Log(const std::string& level, const std::string& text);
  void SetProgress(const gantry::v1::Progress& progress, bool send_now);
  void ProgressLoop();
  bool StopRequested() const;
  bool CheckpointAndStopRequested() const;

  const RankPlan plan_;
  // The model a fresh training starts from: plan_.model with its conditions fitted to the
  // training events (gan::FitConditionsToData); set while the input pipeline is built.
  gan::ModelConfig model_;
  // ModelConfig::generator_template: the template fitted to the training events that a fresh
  // generator starts from (gan::ConditionSample::shower_template); set with model_.
  std::vector<double> shower_template_;
  const RankRunnerOptions options_;
  const int rank_;
  const int world_size_;

  absl::Mutex sink_mu_;
  MessageSink sink_ ABSL_GUARDED_BY(sink_mu_);
  absl::Status sink_status_ ABSL_GUARDED_BY(sink_mu_);

  absl::Mutex progress_mu_;
  gantry::v1::Progress progress_ ABSL_GUARDED_BY(progress_mu_);
  bool have_progress_ ABSL_GUARDED_BY(progress_mu_) = false;
  bool progress_done_ ABSL_GUARDED_BY(progress_mu_) = false;
  std::thread progress_thread_;

  // Filled while running (training thread only).
  RankValidation validation_;  // holds the hold-out on rank 0 with validation only
  gantry::v1::JobResult result_;
  std::unique_ptr<CheckpointClient> checkpoints_;
  std::deque<std::string> local_checkpoints_;
  distributed::Communicator* communicator_ = nullptr;      // world_size > 1, while training
  distributed::DataParallel* data_parallel_ = nullptr;     // world_size > 1, while training
  std::unique_ptr<RankMetricsReporter> metrics_reporter_;  // RankMetrics to the daemon
  bool in_training_ = false;  // exceptions now come from steps (collectives)
  std::chrono::steady_clock::time_point last_save_time_;  // for every_minutes

  // The background upload (at most one) and what the newest successful upload was.
  std::thread upload_thread_;
  absl::Mutex upload_mu_;
  UploadedCheckpoint last_upload_ ABSL_GUARDED_BY(upload_mu_);
  int64_t last_upload_step_ ABSL_GUARDED_BY(upload_mu_) = -1;
};

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_RANK_RUNNER_H_
