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

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gantry/v1/worker.pb.h"
#include "showers/shower_file_reader.h"
#include "workers/gan/trainer.h"
#include "workers/runner/checkpoint_client.h"
#include "workers/runner/checkpoint_publisher.h"
#include "workers/runner/dataset_source.h"
#include "workers/runner/precision_check.h"
#include "workers/runner/rank_input.h"
#include "workers/runner/rank_metrics_reporter.h"
#include "workers/runner/rank_model.h"
#include "workers/runner/rank_options.h"
#include "workers/runner/rank_plan.h"
#include "workers/runner/rank_validation.h"

namespace gantry::distributed {
class Communicator;
class DataParallel;
}  // namespace gantry::distributed

namespace gantry::runner {

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
  absl::Status JoinProcessGroup(gan::Trainer& trainer,
                                std::unique_ptr<distributed::Communicator>* communicator,
                                std::unique_ptr<distributed::DataParallel>* data_parallel);
  absl::Status StartRunning();
  absl::Status FinishJob(gan::Trainer& trainer);
  absl::Status TrainLoop(gan::Trainer& trainer);
  // Whether this step boundary is where the ranks checkpoint and stop: this rank's flag, agreed
  // across the ranks (one-element all-reduce) so that all stop at the same step.
  absl::StatusOr<bool> AgreeOnCheckpointAndStop();
  // The periodic checkpoint of the step that just ended (rank 0): validated first when the job
  // validates (its point of the curve; its fom with keep_best), then published in the background.
  absl::Status PeriodicCheckpoint(gan::Trainer& trainer);
  // checkpoint_policy.best_metric of a validation's metrics, when finite: the checkpoint's fom.
  std::optional<double> BestFigure(const google::protobuf::Map<std::string, double>& metrics) const;
  // Whether a periodic checkpoint is due after the step that just ended.
  bool PeriodicCheckpointDue(const gan::Trainer& trainer, int64_t epoch_before) const;
  // The trainer's checkpoint through publisher_->Publish (CheckpointPublisher says how).
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
  absl::Status CheckpointAndStop(gan::Trainer& trainer);
  void WaitForUpload();
  // The trained generator validated (ValidateWith).
  absl::Status Validate(gan::Trainer& trainer, gantry::v1::JobResult* result,
                        bool final_validation);
  // A baseline-* job (plan_.baseline), after the dataset: fits the baseline to the training
  // events, uploads its checkpoint, validates it and reports the result. No optimiser step.
  absl::Status RunBaseline(const showers::ShowerFileReader& reader, const std::string& particle);

  absl::Status Send(const gantry::v1::WorkerMessage& message);
  void Log(const std::string& level, const std::string& text);
  // Log as a RankLog, for the stages.
  RankLog Logger();
  void SetProgress(const gantry::v1::Progress& progress, bool send_now);
  void ProgressLoop();
  bool StopRequested() const;
  bool CheckpointAndStopRequested() const;

  const RankPlan plan_;
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
  RankInput input_;            // the data stage
  RankValidation validation_;  // holds the hold-out on rank 0 with validation only
  gantry::v1::JobResult result_;
  std::unique_ptr<CheckpointClient> checkpoints_;
  std::unique_ptr<CheckpointPublisher> publisher_;  // from StartRunning on
  distributed::Communicator* communicator_ = nullptr;      // world_size > 1, while training
  distributed::DataParallel* data_parallel_ = nullptr;     // world_size > 1, while training
  std::unique_ptr<RankMetricsReporter> metrics_reporter_;  // RankMetrics to the daemon
  bool in_training_ = false;  // exceptions now come from steps (collectives)
};

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_RANK_RUNNER_H_
