#include "workers/runner/rank_runner.h"

#include <arpa/inet.h>
#include <c10/util/Exception.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/failure_policy.h"
#include "base/status_macros.h"
#include "base/stopwatch.h"
#include "jobspec/model_config.h"
#include "showers/shower_file_reader.h"
#include "workers/distributed/communicator.h"
#include "workers/distributed/data_parallel.h"
#include "workers/gan/shower_generator.h"
#include "workers/runner/dataset_source.h"
#include "workers/runner/training_progress.h"

namespace gantry::runner {
namespace {

// Histograms sent with one validation point (the server allows 4 MiB): the report-wide summaries
// come first, then per-bin histograms while they fit. A point is stored for every checkpoint, so
// the whole set (several MiB for a 3dgan model) goes only with the final result.
constexpr size_t kMaxPointHistogramBytes = 256u << 10;

// The local address a socket towards host:port would use (a connected UDP socket sends nothing):
// the interface other ranks can reach this one on when they reach rank 0 at host. Falls back to
// 127.0.0.1 when the host does not resolve.
std::string LocalAddressTowards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return "127.0.0.1";
  }
  std::string address = "127.0.0.1";
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t length = sizeof(local);
    char text[INET_ADDRSTRLEN] = {};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
        inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr) {
      address = text;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return address;
}

// A failure of a collective (or of a step whose collectives failed): CollectiveTimeout when it says
// it timed out, else PeerLost. Statuses of other kinds (a collapse, a bad config) keep theirs.
absl::Status MarkCollectiveFailure(absl::Status status) {
  if (status.ok() || status.GetPayload(kFailureKindPayload).has_value()) return status;
  const std::string lower = absl::AsciiStrToLower(status.message());
  const bool timed_out = absl::IsDeadlineExceeded(status) ||
                         absl::StrContains(lower, "timed out") ||
                         absl::StrContains(lower, "timeout");
  if (timed_out) return WithExitCode(std::move(status), kExitCollectiveTimeout);
  if (absl::IsUnavailable(status) || absl::IsInternal(status) || absl::IsUnknown(status)) {
    return WithExitCode(std::move(status), kExitPeerLost);
  }
  return status;
}

// A problem with the job's data (missing, unreadable, not fitting the model): DatasetError,
// except that a server that cannot be reached and a cancellation keep their meaning.
absl::Status MarkDataFailure(absl::Status status) {
  if (status.ok() || absl::IsUnavailable(status) || absl::IsCancelled(status) ||
      status.GetPayload(kFailureKindPayload).has_value()) {
    return status;
  }
  return WithExitCode(std::move(status), kExitDataError);
}

}  // namespace

RankRunner::RankRunner(RankPlan plan, RankRunnerOptions options, MessageSink sink)
    : plan_(std::move(plan)),
      options_(std::move(options)),
      rank_(plan_.assignment.rank()),
      world_size_(plan_.assignment.world_size()),
      sink_(std::move(sink)),
      input_(plan_, Logger()),
      validation_(plan_, Logger()) {}

RankRunner::~RankRunner() {
  WaitForUpload();
  {
    absl::MutexLock lock(&progress_mu_);
    progress_done_ = true;
  }
  if (progress_thread_.joinable()) progress_thread_.join();
}

bool RankRunner::StopRequested() const { return options_.stop != nullptr && options_.stop->load(); }

bool RankRunner::CheckpointAndStopRequested() const {
  return options_.checkpoint_and_stop != nullptr && options_.checkpoint_and_stop->load();
}

absl::Status RankRunner::Send(const v1::WorkerMessage& message) {
  absl::MutexLock lock(&sink_mu_);
  if (!sink_status_.ok()) return sink_status_;
  sink_status_ = sink_(message);
  return sink_status_;
}

void RankRunner::Log(const std::string& level, const std::string& text) {
  v1::WorkerMessage message;
  v1::LogLine* line = message.mutable_log();
  line->set_rank(rank_);
  line->set_level(level);
  line->set_text(text);
  Send(message).IgnoreError();  // a broken sink is noticed by the training loop
}

RankLog RankRunner::Logger() {
  return [this](const std::string& level, const std::string& text) { Log(level, text); };
}

void RankRunner::SetProgress(const v1::Progress& progress, bool send_now) {
  {
    absl::MutexLock lock(&progress_mu_);
    progress_ = progress;
    have_progress_ = true;
  }
  if (send_now) {
    v1::WorkerMessage message;
    *message.mutable_progress() = progress;
    Send(message).IgnoreError();
  }
}

void RankRunner::ProgressLoop() {
  progress_mu_.Lock();
  while (!progress_done_) {
    progress_mu_.AwaitWithTimeout(absl::Condition(&progress_done_), options_.progress_interval);
    if (progress_done_ || !have_progress_) continue;
    v1::WorkerMessage message;
    *message.mutable_progress() = progress_;
    progress_mu_.Unlock();
    Send(message).IgnoreError();
    progress_mu_.Lock();
  }
  progress_mu_.Unlock();
}

absl::Status RankRunner::Run() {
  absl::Status status;
  try {
    status = RunInner();
  } catch (const c10::Error& e) {
    status = absl::InternalError(absl::StrCat("LibTorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("unexpected exception: ", e.what()));
  }
  // An exception out of a multi-rank step comes from its collectives (Gloo, synchronised
  // BatchNorm): a peer went away or timed out.
  if (in_training_ && world_size_ > 1) status = MarkCollectiveFailure(status);
  in_training_ = false;
  WaitForUpload();
  {
    absl::MutexLock lock(&progress_mu_);
    progress_done_ = true;
  }
  if (progress_thread_.joinable()) progress_thread_.join();
  if (status.ok()) return status;
  if (RankExitCodeFor(status) == kExitPreempted) {
    Log("INFO", absl::StrCat("rank ", rank_, " stopped: ", status.message()));
    return status;
  }
  if (!absl::IsCancelled(status) && StopRequested()) {
    // Whatever broke after a stop request (a collective whose peer stopped first, a download) is
    // part of the cancellation.
    status = absl::CancelledError(absl::StrCat("cancelled (SIGTERM): ", status.message()));
  }
  if (absl::IsCancelled(status)) {
    Log("INFO", absl::StrCat("rank ", rank_, " stopped: ", status.message()));
    return status;
  }
  Log("ERROR", absl::StrCat("rank ", rank_, " failed: ", status.ToString()));
  if (rank_ == 0) {
    v1::WorkerMessage message;
    v1::JobResult* result = message.mutable_result();
    *result = result_;
    result->set_success(false);
    result->set_message(absl::StrCat("rank 0 failed: ", status.ToString()));
    result->set_exit_code(RankExitCodeFor(status));
    Send(message).IgnoreError();
  }
  return status;
}

absl::Status RankRunner::RunInner() {
  const v1::JobSpec& spec = plan_.assignment.spec();
  Log("INFO", absl::StrFormat("rank %d/%d of %s: preset %s, dataset %s, %d epochs, batch %d per "
                              "rank, %d threads",
                              rank_, world_size_, plan_.assignment.job_id(), plan_.model.preset,
                              spec.dataset(), plan_.epochs, plan_.batch_per_rank, plan_.threads));
  result_.set_code_version(CodeVersion());
  RecordHyperParameters();
  // Reported to the daemon only (its /metrics page): as often as progress, at most every 2 s.
  metrics_reporter_ = std::make_unique<RankMetricsReporter>(
      [this](const v1::WorkerMessage& message) { Send(message).IgnoreError(); },
      std::min(options_.progress_interval, absl::Seconds(2)));

  // 1. The data. The source and the dataset (its lease pins the cache file) live to the end.
  const auto data_start = std::chrono::steady_clock::now();
  DatasetSource source(SourceOptions());
  const absl::Status preempted_early = WithExitCode(
      absl::CancelledError("checkpoint-and-stop (SIGUSR1) before training started: no checkpoint"),
      kExitPreempted);
  absl::StatusOr<MaterializedDataset> materialized =
      source.Materialize(spec.dataset(), plan_.assignment.dataset_sha256());
  if (StopRequested()) return absl::CancelledError("cancelled while materialising the dataset");
  if (!materialized.ok()) return MarkDataFailure(materialized.status());
  MaterializedDataset& dataset = *materialized;
  if (CheckpointAndStopRequested()) return preempted_early;
  absl::StatusOr<std::shared_ptr<const showers::ShowerFileReader>> opened =
      showers::ShowerFileReader::Open(dataset.local_path);
  if (!opened.ok()) return MarkDataFailure(opened.status());
  std::shared_ptr<const showers::ShowerFileReader> reader = *std::move(opened);
  const std::string particle = dataset.particle.empty() ? reader->particle() : dataset.particle;
  input_.Describe(dataset, *reader, particle, SecondsSince(data_start));
  RETURN_IF_ERROR(MarkDataFailure(input_.CheckFitsModel(*reader)));
  RankInput::Record(dataset, particle, &result_);
  metrics_reporter_->Flush();  // the cache hit or fill of the dataset
  if (plan_.baseline.has_value()) return RunBaseline(*reader, particle);

  // 2. The hold-out split and the training input pipeline.
  std::optional<showers::ShowerSet> holdout;
  absl::StatusOr<TrainingInput> input =
      input_.Prepare(reader, particle, dataset.local_path, options_.device.is_cuda(),
                     result_.mutable_hyper_parameters(), &holdout);
  if (!input.ok()) return MarkDataFailure(input.status());
  if (holdout.has_value()) validation_.SetHoldout(*std::move(holdout));
  ASSIGN_OR_RETURN(std::unique_ptr<gan::Trainer> trainer,
                   BuildRankTrainer(plan_, options_, *std::move(input), Logger()));
  if (StopRequested()) return absl::CancelledError("cancelled before training");
  if (CheckpointAndStopRequested()) return preempted_early;

  // 3. The process group (rank 0's weights are broadcast; gradients all-reduced from now on).
  std::unique_ptr<distributed::Communicator> communicator;
  std::unique_ptr<distributed::DataParallel> data_parallel;
  if (world_size_ > 1) RETURN_IF_ERROR(JoinProcessGroup(*trainer, &communicator, &data_parallel));
  if (StopRequested()) return absl::CancelledError("cancelled while forming the process group");
  communicator_ = communicator.get();
  data_parallel_ = data_parallel.get();
  RETURN_IF_ERROR(StartRunning());

  // 4. Training.
  in_training_ = true;
  const absl::Status trained = TrainLoop(*trainer);
  in_training_ = false;
  metrics_reporter_->Flush();
  communicator_ = nullptr;
  data_parallel_ = nullptr;
  RETURN_IF_ERROR(trained);
  if (data_parallel != nullptr) {
    const distributed::DataParallelStats stats = data_parallel->stats();
    Log("INFO", absl::StrFormat("all-reduce: %d rounds, %.1f MB, %.2f s in flight, %.2f s not "
                                "hidden behind backward",
                                stats.reductions, stats.bytes / 1e6, stats.allreduce_seconds,
                                stats.exposed_seconds));
  }
  if (rank_ != 0) return absl::OkStatus();

  // 5. Final checkpoint, validation, result (rank 0).
  return FinishJob(*trainer);
}

void RankRunner::RecordHyperParameters() {
  // The lineage records what was trained with, not the spec's zeros ("preset default").
  const gan::ModelConfig& m = plan_.model;
  // The generator's interface, for the registry's model card.
  v1::GeneratorInterface* generator = result_.mutable_generator();
  generator->clear_grid();
  for (int64_t n : m.grid) generator->add_grid(n);
  generator->set_latent_size(m.noise_dim());
  generator->set_variable_angle(m.variable_angle());
  auto& hp = *result_.mutable_hyper_parameters();
  hp["learning_rate"] = absl::StrCat(m.learning_rate);
  hp["optimizer"] = "rmsprop";
  hp["rmsprop_rho"] = absl::StrCat(m.rms_rho);
  hp["label_flip_probability"] = absl::StrCat(m.label_flip);
  hp["generator_steps_per_discriminator_step"] = absl::StrCat(m.generator_steps);
  hp["loss_weights"] = absl::StrJoin(m.loss_weights, ",");
  if (plan_.lr_decay_to < 1.0) hp["lr_decay_to"] = absl::StrCat(plan_.lr_decay_to);
  if (plan_.bf16_autocast) hp["precision"] = "bf16_autocast";
  hp["batch_per_rank"] =
      absl::StrCat(plan_.batch_per_rank > 0 ? plan_.batch_per_rank : m.default_batch);
  hp["latent"] = absl::StrCat(m.latent);
  hp["generator_filters"] = absl::StrJoin(m.generator_filters, ",");
  hp["discriminator_filters"] = absl::StrJoin(m.discriminator_filters, ",");
}

DatasetSourceOptions RankRunner::SourceOptions() const {
  DatasetSourceOptions source_options;
  source_options.server = options_.server;
  source_options.tls = options_.tls;
  source_options.token = options_.token;
  source_options.cache_dir = options_.cache_dir;
  source_options.cache_max_bytes = options_.cache_max_bytes;
  source_options.file_roots = options_.file_roots;
  // The owner's directories from the assignment; unreadable ones allow nothing (fail closed).
  absl::StatusOr<FileRoots> owner =
      FileRoots::Parse(absl::StrJoin(plan_.assignment.file_roots(), ","), "assignment.file_roots");
  source_options.owner_file_roots = owner.ok() ? *std::move(owner) : FileRoots();
  source_options.denied_dirs = {options_.work_dir};
  source_options.threads = std::max(1, plan_.threads);
  source_options.stop = options_.stop;
  source_options.load_showers = false;  // the trainer streams the pinned cache file
  return source_options;
}

absl::Status RankRunner::JoinProcessGroup(
    gan::Trainer& trainer, std::unique_ptr<distributed::Communicator>* communicator,
    std::unique_ptr<distributed::DataParallel>* data_parallel) {
  const v1::Assignment& a = plan_.assignment;
  distributed::CommunicatorOptions co;
  co.rendezvous_host = a.rendezvous_host();
  co.rendezvous_port = a.rendezvous_port();
  co.rank = rank_;
  co.world_size = world_size_;
  co.gpu = options_.device.is_cuda();
  co.secret = a.rendezvous_secret();
  co.timeout = a.collective_timeout_ms() > 0 ? absl::Milliseconds(a.collective_timeout_ms())
                                             : options_.default_collective_timeout;
  co.bind_host = rank_ == 0 ? a.rendezvous_host()
                 : options_.bind_host.empty()
                     ? LocalAddressTowards(a.rendezvous_host(), a.rendezvous_port())
                     : options_.bind_host;
  const auto connect_start = std::chrono::steady_clock::now();
  Log("INFO",
      absl::StrFormat("joining the process group at %s:%d as rank %d of %d (bind %s); collective "
                      "timeout %s",
                      co.rendezvous_host, co.rendezvous_port, rank_, world_size_, co.bind_host,
                      absl::FormatDuration(co.timeout)));
  // The group could not be formed (nobody answered, a peer vanished while the weights were
  // broadcast): RendezvousFailed, retryable. Refused options and ranks that disagree on the data
  // keep their own kind.
  auto rendezvous_failure = [](absl::Status s) {
    if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsInternal(s)) {
      return WithExitCode(std::move(s), kExitRendezvousFailed);
    }
    return s;
  };
  absl::StatusOr<std::unique_ptr<distributed::Communicator>> connected =
      distributed::Communicator::Connect(co);
  if (!connected.ok()) return rendezvous_failure(connected.status());
  *communicator = *std::move(connected);
  absl::StatusOr<std::unique_ptr<distributed::DataParallel>> attached =
      distributed::DataParallel::Attach(trainer, **communicator,
                                        distributed::DataParallelOptions());
  if (!attached.ok()) return rendezvous_failure(attached.status());
  *data_parallel = *std::move(attached);
  Log("INFO", absl::StrFormat("process group formed: %d ranks in %.1f s", world_size_,
                              SecondsSince(connect_start)));
  return absl::OkStatus();
}

absl::Status RankRunner::StartRunning() {
  v1::WorkerMessage running;
  running.mutable_rank_status()->set_rank(rank_);
  running.mutable_rank_status()->set_phase(v1::RANK_PHASE_RUNNING);
  RETURN_IF_ERROR(Send(running));
  // Every rank may have to upload (checkpoint-and-stop); rank 0 also saves periodically.
  checkpoints_ = std::make_unique<CheckpointClient>(
      options_.server, options_.token, absl::Minutes(10), ChannelCredentialsFor(options_.tls));
  CheckpointPublisherOptions publishing;
  publishing.job_id = plan_.assignment.job_id();
  publishing.attempt = plan_.assignment.attempt();
  publishing.rank = rank_;
  publishing.work_dir = options_.work_dir;
  publishing.keep_last = plan_.keep_last;
  publishing.final_upload_retry = options_.final_upload_retry;
  publishing.stopping = [this] { return StopRequested(); };
  publisher_ =
      std::make_unique<CheckpointPublisher>(std::move(publishing), checkpoints_.get(), Logger());
  if (rank_ == 0) progress_thread_ = std::thread([this] { ProgressLoop(); });
  return absl::OkStatus();
}

absl::Status RankRunner::FinishJob(gan::Trainer& trainer) {
  WaitForUpload();
  const PublishedCheckpoint last = publisher_->last();
  UploadedCheckpoint final_upload = last.upload;
  const bool uploaded = last.step == trainer.state().step;
  // keep_best: the final checkpoint carries its fom too, so validation runs before its upload (a
  // failed validation still uploads it, without a fom, and then fails the job).
  bool validated = false;
  absl::Status validation = absl::OkStatus();
  if (!uploaded) {
    std::optional<double> fom;
    if (plan_.keep_best && plan_.validation && !CheckpointAndStopRequested() && !StopRequested()) {
      validation = Validate(trainer, &result_, /*final_validation=*/true);
      validated = true;
      if (validation.ok()) fom = BestFigure(result_.metrics());
    }
    RETURN_IF_ERROR(SaveAndUpload(trainer, /*final_checkpoint=*/true, absl::ZeroDuration(), fom));
    final_upload = publisher_->last().upload;
  }
  RETURN_IF_ERROR(validation);
  result_.set_checkpoint_sha256(final_upload.sha256);
  result_.set_checkpoint_size_bytes(final_upload.size_bytes);
  if (CheckpointAndStopRequested()) {
    // The final checkpoint is uploaded: a restart resumes at the end and only validates.
    return WithExitCode(
        absl::CancelledError(absl::StrCat("checkpoint-and-stop (SIGUSR1) after training; the final "
                                          "checkpoint ",
                                          final_upload.sha256, " is uploaded")),
        kExitPreempted);
  }
  if (plan_.validation && !validated) {
    if (StopRequested()) return absl::CancelledError("cancelled before validation");
    RETURN_IF_ERROR(Validate(trainer, &result_, /*final_validation=*/true));
  }
  if (plan_.validation && validation_.last().has_value()) {
    *result_.mutable_bf16() = PrecisionCheck::Run(trainer.config(), trainer.state().generator,
                                                  validation_.holdout(), *validation_.last());
    Log("INFO", absl::StrCat("BF16 check: ", v1::Bf16Check::State_Name(result_.bf16().state()), " ",
                             result_.bf16().reason()));
  }
  if (plan_.validation) {
    // The last point of the validation curve: the validation the model is registered with.
    publisher_->ReportPoint(
        PointOf(result_, static_cast<int>(trainer.state().epoch), trainer.state().step));
  }
  result_.set_success(true);
  result_.set_message(absl::StrFormat(
      "trained %d epochs (%d steps) on %d ranks; checkpoint %s%s", trainer.state().epoch,
      trainer.state().step, world_size_, final_upload.sha256,
      plan_.validation ? absl::StrFormat("; validation fom %.4g", result_.metrics().at("fom"))
                       : "; validation disabled"));
  {
    absl::MutexLock lock(&progress_mu_);
    progress_done_ = true;
  }
  if (progress_thread_.joinable()) progress_thread_.join();
  v1::WorkerMessage message;
  *message.mutable_result() = result_;
  return Send(message);
}

absl::Status RankRunner::TrainLoop(gan::Trainer& trainer) {
  TrainingProgress meter(trainer.config().variable_angle(), plan_.epochs, trainer.steps_per_epoch(),
                         trainer.state().step,
                         static_cast<double>(trainer.batch_size()) * world_size_);
  const auto start = std::chrono::steady_clock::now();
  // keep_best: the untrained model (a fresh start's, or a fine-tune's parent) is a candidate too.
  if (rank_ == 0 && plan_.keep_best && plan_.validation && trainer.state().step == 0 &&
      trainer.state().epoch < plan_.epochs) {
    RETURN_IF_ERROR(PeriodicCheckpoint(trainer));
  }
  while (trainer.state().epoch < plan_.epochs) {
    if (StopRequested()) {
      return absl::CancelledError(
          absl::StrCat("cancelled at step ", trainer.state().step, " (SIGTERM)"));
    }
    {
      absl::MutexLock lock(&sink_mu_);
      if (!sink_status_.ok()) {
        return absl::UnavailableError(
            absl::StrCat("the worker daemon stopped listening: ", sink_status_.message()));
      }
    }
    ASSIGN_OR_RETURN(const bool checkpoint_and_stop, AgreeOnCheckpointAndStop());
    if (checkpoint_and_stop) return CheckpointAndStop(trainer);
    const int64_t epoch = trainer.state().epoch;
    absl::StatusOr<gan::StepReport> step = trainer.Step();
    if (!step.ok() && StopRequested()) {
      // A peer that stopped first breaks the collectives of this step: still a cancellation.
      return absl::CancelledError(absl::StrCat("cancelled at step ", trainer.state().step,
                                               " (SIGTERM; ", step.status().message(), ")"));
    }
    if (!step.ok()) {
      return world_size_ > 1 ? MarkCollectiveFailure(step.status()) : step.status();
    }
    const gan::StepReport& report = *step;
    metrics_reporter_->OnStep(
        report.seconds, report.data_wait_seconds, trainer.batch_size(),
        data_parallel_ != nullptr ? data_parallel_->stats().allreduce_seconds : 0);
    const bool epoch_end = trainer.state().epoch != epoch;
    const TrainingProgress::Update update =
        meter.OnStep({report.discriminator_real_loss, report.discriminator_fake_loss,
                      report.generator_loss, report.seconds, report.data_wait_seconds},
                     epoch, trainer.state().step, epoch_end, SecondsSince(start),
                     /*report=*/rank_ == 0);
    if (rank_ == 0) {
      SetProgress(update.progress, /*send_now=*/epoch_end);
      if (epoch_end) Log("INFO", update.epoch_line);
      if (PeriodicCheckpointDue(trainer, epoch)) RETURN_IF_ERROR(PeriodicCheckpoint(trainer));
    }
  }
  (*result_.mutable_metrics())["data_stall_fraction"] = meter.data_stall_fraction();
  return absl::OkStatus();
}

absl::Status RankRunner::PeriodicCheckpoint(gan::Trainer& trainer) {
  std::optional<double> fom;
  std::optional<v1::ValidationPoint> point;
  if (plan_.validation) point = ValidateCheckpoint(trainer);
  if (plan_.keep_best && point.has_value()) {
    fom = BestFigure(point->metrics());
    if (!fom.has_value()) {
      // Uploaded without a fom: a restart point, never the best.
      Log("WARNING",
          absl::StrCat("checkpoint_policy.keep_best: the checkpoint of step ", trainer.state().step,
                       " has no finite ", plan_.best_metric, "; it is not scored"));
    }
  }
  return SaveAndUpload(trainer, /*final_checkpoint=*/false, absl::ZeroDuration(), fom,
                       std::move(point));
}

std::optional<double> RankRunner::BestFigure(
    const google::protobuf::Map<std::string, double>& metrics) const {
  const auto it = metrics.find(plan_.best_metric);
  if (it == metrics.end() || !std::isfinite(it->second)) return std::nullopt;
  return it->second;
}

absl::StatusOr<bool> RankRunner::AgreeOnCheckpointAndStop() {
  const bool mine = CheckpointAndStopRequested();
  if (world_size_ == 1 || communicator_ == nullptr) return mine;
  // The daemon signals its ranks one by one and other workers' ranks later: the ranks agree every
  // step, so all of them stop at the same step with identical checkpoints.
  at::Tensor flag = at::full({1}, mine ? 1 : 0, at::kLong);
  std::vector<at::Tensor> tensors{flag};
  const absl::Status agreed = communicator_->AllReduceSum(tensors);
  if (!agreed.ok()) return MarkCollectiveFailure(agreed);
  return flag.item<int64_t>() > 0;
}

bool RankRunner::PeriodicCheckpointDue(const gan::Trainer& trainer, int64_t epoch_before) const {
  if (rank_ != 0) return false;
  const gan::TrainingState& state = trainer.state();
  if (state.epoch >= plan_.epochs) return false;  // the final checkpoint follows
  const bool epoch_end = state.epoch != epoch_before;
  const int every_epochs = plan_.checkpoint_every_epochs;
  if (epoch_end && every_epochs > 0 && state.epoch % every_epochs == 0) return true;
  const int64_t every_steps = plan_.checkpoint_every_steps;
  if (every_steps > 0 && state.step % every_steps == 0) return true;
  const double every_minutes = plan_.checkpoint_every_minutes;
  return every_minutes > 0 && publisher_->SinceLastSave() >= absl::Minutes(every_minutes);
}

absl::Status RankRunner::CheckpointAndStop(gan::Trainer& trainer) {
  const int64_t step = trainer.state().step;
  Log("INFO", absl::StrFormat("rank %d: checkpoint-and-stop requested; saving the checkpoint of "
                              "epoch %d, step %d",
                              rank_, trainer.state().epoch, step));
  WaitForUpload();
  const bool uploaded = publisher_->last().step == step;
  absl::Status saved = absl::OkStatus();
  if (!uploaded) {
    saved = SaveAndUpload(trainer, /*final_checkpoint=*/true,
                          std::min(options_.final_upload_retry, absl::Seconds(20)));
  }
  const UploadedCheckpoint upload = publisher_->last().upload;
  if (!saved.ok()) {
    // Exiting as preempted still beats being killed at the end of the grace: the job restarts
    // from its previous checkpoint.
    Log("WARNING", absl::StrCat("rank ", rank_, ": the checkpoint of step ", step,
                                " could not be uploaded: ", saved.ToString()));
    return WithExitCode(absl::CancelledError(absl::StrCat("checkpoint-and-stop at step ", step,
                                                          " without an uploaded checkpoint (",
                                                          saved.message(), ")")),
                        kExitPreempted);
  }
  Log("INFO", absl::StrFormat("rank %d: checkpoint of epoch %d, step %d uploaded (sha256 %s); "
                              "stopping for checkpoint-and-stop",
                              rank_, trainer.state().epoch, step, upload.sha256));
  return WithExitCode(
      absl::CancelledError(absl::StrCat("checkpointed at step ", step, " (", upload.sha256,
                                        ") and stopped (checkpoint-and-stop)")),
      kExitPreempted);
}

std::optional<v1::ValidationPoint> RankRunner::ValidateCheckpoint(gan::Trainer& trainer) {
  v1::JobResult validated;
  const absl::Status status = Validate(trainer, &validated, /*final_validation=*/false);
  if (!status.ok()) {
    Log("WARNING",
        absl::StrCat("validation of the checkpoint of step ", trainer.state().step,
                     " failed; the validation curve has no point there: ", status.ToString()));
    return std::nullopt;
  }
  return PointOf(validated, static_cast<int>(trainer.state().epoch), trainer.state().step);
}

v1::ValidationPoint RankRunner::PointOf(const v1::JobResult& validated, int epoch, int64_t step) {
  v1::ValidationPoint point;
  point.set_epoch(epoch);
  point.set_step(step);
  std::vector<std::string> dropped;
  for (const auto& [name, value] : validated.metrics()) {
    if (name == "data_stall_fraction") continue;  // a training figure, not a validation one
    if (std::isfinite(value)) {
      (*point.mutable_metrics())[name] = value;
    } else {
      dropped.push_back(absl::StrCat(name, "=", value));
    }
  }
  if (!dropped.empty()) {
    Log("WARNING", absl::StrCat("validation of step ", step,
                                ": non-finite metrics left out of the validation curve: ",
                                absl::StrJoin(dropped, ", ")));
  }
  size_t bytes = 0;
  for (const v1::Histogram& h : validated.histograms()) {
    bytes += h.ByteSizeLong() + 8;
    if (bytes > kMaxPointHistogramBytes) break;
    *point.add_histograms() = h;
  }
  return point;
}

absl::Status RankRunner::SaveAndUpload(gan::Trainer& trainer, bool final_checkpoint,
                                       absl::Duration retry_for, std::optional<double> fom,
                                       std::optional<v1::ValidationPoint> point) {
  return publisher_->Publish(
      static_cast<int>(trainer.state().epoch), trainer.state().step,
      [&trainer](const std::string& path) { return trainer.SaveCheckpoint(path); },
      final_checkpoint, retry_for, fom, std::move(point));
}

void RankRunner::WaitForUpload() {
  if (publisher_ != nullptr) publisher_->Wait();
}

absl::Status RankRunner::Validate(gan::Trainer& trainer, v1::JobResult* result,
                                  bool final_validation) {
  gan::ShowerGenerator generator(trainer.config(), trainer.state().generator);
  return validation_.Run(
      [&generator](const gan::GenerationRequest& request) { return generator.Generate(request); },
      trainer.config().variable_angle(), final_validation, result);
}

}  // namespace gantry::runner
