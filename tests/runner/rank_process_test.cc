// `gantry-worker rank` as a real child process with a real control pipe, against a real
// gantry-server: a world_size-1 job end to end (RANK_RUNNING, progress, uploaded checkpoints,
// validation metrics in the JobResult), refused assignments (exit 2), a failing dataset (exit 3
// with a JobResult), SIGTERM (exit 143 within seconds), SIGUSR1 (checkpoint, upload, exit 200; both
// ranks of a job at the same step) and a restart resuming bit for bit from that checkpoint.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <torch/serialize/output-archive.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "jobspec/model_config.h"
#include "showers/toy_mc.h"
#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/files.h"
#include "workers/agent/control_pipe.h"
#include "workers/gan/checkpoint.h"
#include "workers/gan/checkpoint_diff.h"
#include "workers/runner/checkpoint_client.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
namespace fs = std::filesystem;

using ::gantry::testing::ReadFile;

// A rank child process and everything it wrote to its control pipe.
struct RankRun {
  int exit_code = -1;
  double seconds = 0;
  std::vector<v1::WorkerMessage> messages;
  std::string stderr_text;
  absl::Status pipe_status;

  std::vector<v1::WorkerMessage> Of(v1::WorkerMessage::KindCase kind) const {
    std::vector<v1::WorkerMessage> out;
    for (const auto& m : messages) {
      if (m.kind_case() == kind) out.push_back(m);
    }
    return out;
  }
  std::string Logs() const {
    std::string out;
    for (const auto& m : messages) {
      if (m.has_log()) out += m.log().level() + " " + m.log().text() + "\n";
    }
    return out;
  }
};

class RankProcessTest : public ServerFixture {
 protected:
  // The test plays the daemon and sends no heartbeats: jobs it marks RUNNING would be ended as
  // unclaimed orphans one lease after the server started (15 s by default), which a rank run on a
  // loaded machine outlasts.
  std::vector<std::string> SetUpServerArgs() const override {
    return {"--lease-timeout-ms", "600000"};
  }

  void SetUp() override {
    ServerFixture::SetUp();
    v1::CreateTokenResponse join;
    grpc::Status s = admin_->CreateJoinToken(Ctx(admin_token_).get(), {}, &join);
    ASSERT_TRUE(s.ok()) << Describe(s);
    tenant_ = NewTenant("calo");
    // The server's rank-credential key (created at its start): the test plays the daemon that got
    // each assignment's credential from the server.
    ASSERT_EQ(RankKey().size(), 64u);
  }

  // What the server issues to rank processes of `job_id` attempt `attempt` (Assignment
  // rank_credential), for a worker of the test.
  static constexpr const char* kTestWorker = "wrk-rank-process-test";
  std::string RankCredential(const std::string& job_id, int attempt = 0) {
    return IssueRankCredential(job_id, attempt, kTestWorker);
  }

  std::string SubmitJob(const v1::JobSpec& spec) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    v1::Job job;
    grpc::Status s = training_->SubmitJob(Ctx(tenant_).get(), request, &job);
    EXPECT_TRUE(s.ok()) << Describe(s);
    PlaceJob(job.id(), 0, std::max(1, spec.world_size()));
    return job.id();
  }

  // The server's side of a placement, as the test plays the daemon: attempt `attempt` of the job
  // runs with every rank on the test's worker (what checkpoint uploads and validation reports
  // need). Nothing for a job id the server does not know.
  void PlaceJob(const std::string& job_id, int attempt, int world_size) {
    db_.Query(absl::StrCat("UPDATE jobs SET state = 'JOB_STATE_RUNNING', attempt = ", attempt,
                           " WHERE id = '", job_id, "'"));
    for (int rank = 0; rank < world_size; ++rank) {
      db_.Query(
          absl::StrCat("INSERT INTO job_placements (job_id, attempt, rank, worker_id) SELECT id, ",
                       attempt, ", ", rank, ", '", kTestWorker, "' FROM jobs WHERE id = '", job_id,
                       "' ON CONFLICT DO NOTHING"));
    }
  }

  static v1::JobSpec TinySpec() {
    v1::JobSpec spec;
    spec.set_display_name("runner test");
    spec.set_model_preset("tiny");
    spec.set_dataset("toymc:layout=25,events=24,seed=3,emin=10,emax=100");
    spec.set_world_size(1);
    v1::HyperParameters* h = spec.mutable_hyper_parameters();
    h->set_epochs(2);
    h->set_batch_per_rank(8);
    h->set_seed(5);
    spec.mutable_validation()->set_holdout_fraction(0.25);
    spec.mutable_checkpoint_policy()->set_every_epochs(1);
    spec.mutable_checkpoint_policy()->set_keep_last(1);
    return spec;
  }

  v1::Assignment AssignmentFor(const std::string& job_id, const v1::JobSpec& spec) {
    v1::Assignment a;
    a.set_job_id(job_id);
    *a.mutable_spec() = spec;
    a.set_rank(0);
    a.set_world_size(1);
    a.set_threads(1);
    a.set_owner("calo");
    return a;
  }

  // Writes the assignment, and its rank credential into <path>.credential (StandardFlags passes
  // that file to the rank).
  std::string WriteAssignment(const v1::Assignment& a, const std::string& name = "assignment.pb") {
    const std::string path = dir_.File(name);
    PlaceJob(a.job_id(), a.attempt(), std::max(1, a.world_size()));
    std::ofstream(path, std::ios::binary) << a.SerializeAsString();
    gantry::testing::WriteSecretFile(path + ".credential", RankCredential(a.job_id(), a.attempt()));
    return path;
  }

  // A fine-tuning run: submits `spec`, uploads `initial` as the job's checkpoint and runs the rank
  // with it as the initial checkpoint. Sets the job id and the uploaded checkpoint's sha256.
  RankRun FineTune(const v1::JobSpec& spec, const gan::TrainingState& initial, std::string* job_id,
                   std::string* sha256) {
    EXPECT_TRUE(gan::WriteCheckpoint(dir_.File("initial.ckpt"), initial).ok());
    *job_id = SubmitJob(spec);
    runner::CheckpointClient client(server_->address(), RankCredential(*job_id));
    absl::StatusOr<runner::UploadedCheckpoint> uploaded =
        client.Upload(*job_id, 0, 0, dir_.File("initial.ckpt"));
    EXPECT_TRUE(uploaded.ok()) << uploaded.status();
    *sha256 = uploaded.ok() ? uploaded->sha256 : "";
    v1::Assignment a = AssignmentFor(*job_id, spec);
    a.set_initial_checkpoint_sha256(*sha256);
    return Run(StandardFlags(WriteAssignment(a)));
  }

  // Starts the rank with its control pipe; `on_message` sees every message as it arrives (on the
  // reader thread) and may send signals.
  RankRun Run(const std::vector<std::string>& flags,
              std::function<void(pid_t, const v1::WorkerMessage&)> on_message = nullptr,
              const std::string& tag = "rank") {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
    const std::string stderr_path = dir_.File(tag + ".stderr");
    std::vector<std::string> args = {GANTRY_WORKER_BINARY, "rank"};
    args.insert(args.end(), flags.begin(), flags.end());
    for (std::string& a : args) {
      if (a == "CONTROL_FD") a = "--control-fd=" + std::to_string(fds[1]);
    }
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid == 0) {
      fcntl(fds[1], F_SETFD, 0);  // only this end is inherited (a sibling rank's pipe is not)
      const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(err, 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    RankRun run;
    agent::ControlPipeReader reader(fds[0]);
    while (true) {
      absl::StatusOr<std::optional<v1::WorkerMessage>> next = reader.Next();
      if (!next.ok()) {
        run.pipe_status = next.status();
        break;
      }
      if (!next->has_value()) break;
      if (on_message) on_message(pid, **next);
      run.messages.push_back(**next);
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    run.stderr_text = ReadFile(stderr_path);
    return run;
  }

  std::vector<std::string> StandardFlags(const std::string& assignment,
                                         const std::string& tag = "") {
    fs::create_directories(dir_.File("work" + tag));
    return {"--assignment=" + assignment,
            "CONTROL_FD",
            "--server=" + server_->address(),
            "--cache-dir=" + dir_.File("cache" + tag),
            "--work-dir=" + dir_.File("work" + tag),
            "--credential-file=" + assignment + ".credential"};
  }

  std::string tenant_;
};

TEST_F(RankProcessTest, TrainsChecksPointsValidatesAndReports) {
  v1::JobSpec spec = TinySpec();
  spec.mutable_data_pipeline()->set_prefetch_batches(3);  // overrides the automatic 4
  spec.mutable_data_pipeline()->set_loader_threads(2);
  const std::string job_id = SubmitJob(spec);
  ASSERT_FALSE(job_id.empty());
  RankRun run = Run(StandardFlags(WriteAssignment(AssignmentFor(job_id, spec))));
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text << run.Logs();
  ASSERT_TRUE(run.pipe_status.ok()) << run.pipe_status;

  // Every message carries the job id; RANK_RUNNING comes before any progress.
  int first_running = -1, first_progress = -1;
  for (size_t i = 0; i < run.messages.size(); ++i) {
    EXPECT_EQ(run.messages[i].job_id(), job_id);
    if (run.messages[i].has_rank_status() && first_running < 0) first_running = i;
    if (run.messages[i].has_progress() && first_progress < 0) first_progress = i;
  }
  ASSERT_GE(first_running, 0) << run.Logs();
  EXPECT_EQ(run.messages[first_running].rank_status().phase(), v1::RANK_PHASE_RUNNING);
  EXPECT_EQ(run.messages[first_running].rank_status().rank(), 0);
  ASSERT_GT(first_progress, first_running);

  // Progress: 18 training events / batch 8 = 2 steps per epoch, 2 epochs; the last at the end.
  const auto progress = run.Of(v1::WorkerMessage::kProgress);
  ASSERT_GE(progress.size(), 2u);
  const v1::Progress& last = progress.back().progress();
  EXPECT_EQ(last.epoch(), 2);
  EXPECT_EQ(last.epochs(), 2);
  EXPECT_EQ(last.step(), 4);
  EXPECT_EQ(last.steps_per_epoch(), 2);
  EXPECT_GT(last.samples_per_second(), 0);
  EXPECT_EQ(last.eta_seconds(), 0);
  for (const char* key : {"d_loss", "g_loss", "d_real", "d_fake", "d_adversarial", "d_energy",
                          "d_ecal", "g_adversarial", "g_energy", "g_ecal"}) {
    ASSERT_TRUE(last.losses().contains(key)) << key;
    EXPECT_TRUE(std::isfinite(last.losses().at(key))) << key;
  }
  EXPECT_NEAR(last.losses().at("d_loss"),
              0.5 * (last.losses().at("d_real") + last.losses().at("d_fake")), 1e-9);
  bool saw_epoch_one = false;
  for (const auto& p : progress) saw_epoch_one |= p.progress().epoch() == 1;
  EXPECT_TRUE(saw_epoch_one);
  // Every progress carries the data-stall fraction so far (the first batch is always waited for).
  for (const auto& p : progress) {
    EXPECT_GT(p.progress().data_stall_fraction(), 0) << p.DebugString();
    EXPECT_LT(p.progress().data_stall_fraction(), 1) << p.DebugString();
  }

  const std::string logs = run.Logs();
  EXPECT_NE(logs.find("materialised: 24 events"), std::string::npos) << logs;
  EXPECT_NE(logs.find("6 events set aside"), std::string::npos) << logs;
  EXPECT_NE(logs.find("epoch 2/2 done"), std::string::npos) << logs;
  EXPECT_NE(logs.find("3 batches read ahead by 2 loader threads"), std::string::npos) << logs;
  EXPECT_NE(logs.find("data stall"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("ERROR"), std::string::npos) << logs;

  // The result: success, the final checkpoint, validation metrics and histograms, lineage.
  const auto results = run.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(results.size(), 1u) << logs;
  const v1::JobResult& result = results[0].result();
  EXPECT_TRUE(result.success()) << result.message();
  EXPECT_EQ(run.messages.back().kind_case(), v1::WorkerMessage::kResult);
  for (const char* key :
       {"mre_sampling_fraction", "mre_sampling_fraction_null", "eprof", "eprof_null", "pos",
        "pos_null", "fom", "bins_used", "holdout_events", "generated_events"}) {
    ASSERT_TRUE(result.metrics().contains(key)) << key;
    EXPECT_TRUE(std::isfinite(result.metrics().at(key))) << key;
  }
  // The bounded relative errors (validation.h), with their floors.
  for (const char* key :
       {"sf_relative_error_max", "shower_max_relative_error", "centroid_depth_relative_error",
        "eprof_longitudinal", "eprof_transverse"}) {
    for (const std::string name : {std::string(key), std::string(key) + "_null"}) {
      ASSERT_TRUE(result.metrics().contains(name)) << name;
      EXPECT_GE(result.metrics().at(name), 0) << name;
      EXPECT_LE(result.metrics().at(name), 1) << name;
    }
  }
  EXPECT_FALSE(result.metrics().contains("ang"));  // fixed-angle model
  EXPECT_EQ(result.metrics().at("holdout_events"), 6);
  EXPECT_EQ(result.metrics().at("generated_events"), 6);
  EXPECT_GT(result.metrics().at("fom"), 0);
  ASSERT_TRUE(result.metrics().contains("data_stall_fraction"));
  EXPECT_GT(result.metrics().at("data_stall_fraction"), 0);
  EXPECT_LT(result.metrics().at("data_stall_fraction"), 1);
  EXPECT_EQ(result.hyper_parameters().at("prefetch_batches"), "3");
  EXPECT_EQ(result.hyper_parameters().at("loader_threads"), "2");
  EXPECT_FALSE(result.histograms().empty());
  bool has_profile = false, has_sf_vs_energy = false;
  for (const auto& h : result.histograms()) {
    has_profile |= absl::StartsWith(h.name(), "profile_");
    EXPECT_EQ(h.reference_size(), h.generated_size()) << h.name();
    if (absl::StartsWith(h.name(), "profile_")) {
      EXPECT_EQ(h.reference_error_size(), h.reference_size()) << h.name();
      EXPECT_EQ(h.generated_error_size(), h.generated_size()) << h.name();
    }
    if (h.name() == "sampling_fraction_vs_energy") {
      has_sf_vs_energy = true;
      EXPECT_EQ(h.edges_size(), 0);
      EXPECT_EQ(h.x_size(), h.reference_size());
      EXPECT_EQ(h.reference_error_size(), h.reference_size());
      EXPECT_GT(h.reference_size(), 0);
    }
  }
  EXPECT_TRUE(has_profile);
  EXPECT_TRUE(has_sf_vs_energy);
  absl::StatusOr<showers::ToyMcConfig> toy = showers::ParseToyMcSpec(spec.dataset());
  ASSERT_TRUE(toy.ok());
  EXPECT_EQ(result.dataset_sha256(), Sha256Hex(showers::FormatToyMcSpec(*toy)));
  EXPECT_TRUE(absl::StrContains(result.code_version(), "+")) << result.code_version();
  EXPECT_EQ(result.energy_range_gev().min(), 10);  // the simulated range of the toy MC
  EXPECT_EQ(result.energy_range_gev().max(), 100);
  EXPECT_FALSE(result.has_theta_range_rad());
  EXPECT_EQ(result.particle(), v1::PARTICLE_ELECTRON);

  // Two checkpoints were uploaded (epochs 1 and 2); the final one is fetchable and loads as the
  // state after 4 steps; keep_last = 1 leaves one local file.
  size_t uploads = 0;
  for (size_t at = logs.find("uploaded: sha256"); at != std::string::npos;
       at = logs.find("uploaded: sha256", at + 1)) {
    ++uploads;
  }
  EXPECT_EQ(uploads, 2u) << logs;
  ASSERT_EQ(result.checkpoint_sha256().size(), 64u);
  runner::CheckpointClient client(server_->address(), RankCredential(job_id));
  absl::StatusOr<runner::UploadedCheckpoint> fetched =
      client.Fetch(result.checkpoint_sha256(), dir_.File("fetched.ckpt"));
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->size_bytes, result.checkpoint_size_bytes());
  absl::StatusOr<gan::TrainingState> state = gan::ReadCheckpoint(dir_.File("fetched.ckpt"));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->step, 4);
  EXPECT_EQ(state->epoch, 2);
  EXPECT_EQ(state->config.preset, "tiny");
  int local = 0;
  for (const auto& entry : fs::directory_iterator(dir_.File("work"))) {
    if (entry.path().extension() == ".ckpt") ++local;
  }
  EXPECT_EQ(local, 1);
}

TEST_F(RankProcessTest, RefusedAssignmentsExitTwoWithAMessage) {
  // Rank outside the world.
  v1::Assignment bad = AssignmentFor("job-x", TinySpec());
  bad.set_rank(3);
  bad.set_world_size(2);
  bad.mutable_spec()->set_world_size(2);
  RankRun run = Run(StandardFlags(WriteAssignment(bad)));
  EXPECT_EQ(run.exit_code, 2) << run.stderr_text;
  EXPECT_NE(run.stderr_text.find("assignment.rank"), std::string::npos) << run.stderr_text;
  const auto logs = run.Of(v1::WorkerMessage::kLog);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].log().level(), "ERROR");
  EXPECT_NE(logs[0].log().text().find("assignment.rank"), std::string::npos);
  EXPECT_TRUE(run.Of(v1::WorkerMessage::kResult).empty());  // not rank 0
  EXPECT_TRUE(run.Of(v1::WorkerMessage::kRankStatus).empty());

  // Rank 0 with an unsupported optimiser also says so in a failed JobResult.
  v1::Assignment adam = AssignmentFor("job-y", TinySpec());
  adam.mutable_spec()->mutable_hyper_parameters()->set_optimizer("adam");
  run = Run(StandardFlags(WriteAssignment(adam)));
  EXPECT_EQ(run.exit_code, 2);
  const auto results = run.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].result().success());
  EXPECT_NE(results[0].result().message().find("optimizer"), std::string::npos);
  EXPECT_EQ(results[0].job_id(), "job-y");

  // Not an Assignment at all, and a missing file.
  std::ofstream(dir_.File("garbage.pb")) << "\xff\xff\xff not a proto";
  run = Run(StandardFlags(dir_.File("garbage.pb")));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.stderr_text.find("not a serialized gantry.v1.Assignment"), std::string::npos)
      << run.stderr_text;
  run = Run(StandardFlags(dir_.File("missing.pb")));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.stderr_text.find("missing.pb"), std::string::npos) << run.stderr_text;

  // Missing flags and unknown flags.
  run = Run({"--assignment=" + dir_.File("missing.pb")});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.stderr_text.find("--control-fd"), std::string::npos) << run.stderr_text;
  run = Run({"CONTROL_FD", "--bogus=1"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.stderr_text.find("bogus"), std::string::npos) << run.stderr_text;
}

TEST_F(RankProcessTest, ADeviceTheRankCannotUseIsRefusedBeforeAnyWork) {
  // cuda:127 exists on no machine (a CPU build has no cuda device at all): exit 2 and, from rank
  // 0, a failed JobResult saying which device and why, before the dataset is touched.
  v1::Assignment assignment = AssignmentFor("job-dev", TinySpec());
  std::vector<std::string> flags = StandardFlags(WriteAssignment(assignment));
  flags.push_back("--device=cuda:127");
  RankRun run = Run(flags);
  EXPECT_EQ(run.exit_code, 2) << run.stderr_text;
  auto results = run.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].result().success());
  EXPECT_NE(results[0].result().message().find("cuda:127"), std::string::npos)
      << results[0].result().message();
  EXPECT_NE(results[0].result().message().find("FAILED_PRECONDITION"), std::string::npos)
      << results[0].result().message();
  EXPECT_TRUE(run.Of(v1::WorkerMessage::kRankStatus).empty());

  // A spelling that is no device at all.
  flags.back() = "--device=gpu:0";
  run = Run(flags);
  EXPECT_EQ(run.exit_code, 2) << run.stderr_text;
  results = run.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(results[0].result().message().find("cuda:N"), std::string::npos)
      << results[0].result().message();
}

TEST_F(RankProcessTest, MissingDatasetFailsWithAResultNamingIt) {
  v1::JobSpec spec = TinySpec();
  spec.set_dataset("ds-00000000-0000-0000-0000-000000000000");
  RankRun run = Run(StandardFlags(WriteAssignment(AssignmentFor("job-z", spec))));
  EXPECT_EQ(run.exit_code, 3) << run.stderr_text;  // kExitDataError: permanent
  const auto results = run.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(results.size(), 1u) << run.Logs();
  EXPECT_FALSE(results[0].result().success());
  EXPECT_EQ(results[0].result().exit_code(), 3);
  EXPECT_NE(results[0].result().message().find("ds-00000000-0000-0000-0000-000000000000"),
            std::string::npos)
      << results[0].result().message();
  EXPECT_NE(run.Logs().find("ERROR"), std::string::npos);
  EXPECT_TRUE(run.Of(v1::WorkerMessage::kRankStatus).empty());  // never started training
}

TEST_F(RankProcessTest, CheckpointUploadRetriesWhileTheServerRestarts) {
  v1::JobSpec spec = TinySpec();
  spec.mutable_hyper_parameters()->set_epochs(1);
  spec.mutable_validation()->set_disabled(true);
  const std::string job_id = SubmitJob(spec);
  const std::string address = server_->address();
  std::vector<std::string> flags = StandardFlags(WriteAssignment(AssignmentFor(job_id, spec)));
  flags.push_back("--max-steps-per-epoch=1");
  bool restarted = false;
  RankRun run = Run(flags, [&](pid_t, const v1::WorkerMessage& m) {
    // Training has started: take the server down; bring it back on the same address once the
    // rank has seen an upload fail.
    if (m.has_rank_status()) EXPECT_EQ(StopServer(), 0);
    if (m.has_log() && m.log().level() == "WARNING" && !restarted) {
      restarted = true;
      StartServer({"--listen=" + address});
    }
  });
  EXPECT_TRUE(restarted);
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text << run.Logs();
  EXPECT_NE(run.Logs().find("WARNING checkpoint upload failed (UNAVAILABLE"), std::string::npos)
      << run.Logs();
  const auto results = run.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].result().success());
  runner::CheckpointClient client(address, RankCredential(job_id));
  EXPECT_TRUE(client.Fetch(results[0].result().checkpoint_sha256(), dir_.File("r.ckpt")).ok());
}

// Mean absolute difference of two modules' parameters (same architecture).
double Distance(torch::nn::Module& a, torch::nn::Module& b) {
  double sum = 0;
  int64_t n = 0;
  auto pa = a.named_parameters();
  auto pb = b.named_parameters();
  for (const auto& item : pa) {
    sum += (item.value() - pb[item.key()]).abs().sum().item<double>();
    n += item.value().numel();
  }
  return sum / static_cast<double>(n);
}

TEST_F(RankProcessTest, FineTunesFromAnInitialCheckpoint) {
  // The initial model: fresh tiny weights from another seed, uploaded like a trained model.
  absl::StatusOr<gan::ModelConfig> tiny = gan::PresetConfig("tiny");
  ASSERT_TRUE(tiny.ok());
  absl::StatusOr<gan::TrainingState> initial = gan::NewTrainingState(*tiny, 77);
  ASSERT_TRUE(initial.ok());
  v1::JobSpec spec = TinySpec();
  spec.mutable_hyper_parameters()->set_epochs(1);
  spec.mutable_validation()->set_disabled(true);
  std::string job_id, sha256;
  RankRun run = FineTune(spec, *initial, &job_id, &sha256);
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text << run.Logs();
  EXPECT_NE(run.Logs().find("fine-tuning from checkpoint " + sha256), std::string::npos);
  runner::CheckpointClient client(server_->address(), RankCredential(job_id));
  const auto results = run.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].result().success());
  // Validation disabled: no physics metrics, only the run's data-stall fraction.
  EXPECT_EQ(results[0].result().metrics().size(), 1u);
  EXPECT_TRUE(results[0].result().metrics().contains("data_stall_fraction"));
  ASSERT_TRUE(client.Fetch(results[0].result().checkpoint_sha256(), dir_.File("tuned.ckpt")).ok());
  absl::StatusOr<gan::TrainingState> tuned = gan::ReadCheckpoint(dir_.File("tuned.ckpt"));
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_EQ(tuned->step, 3);  // no hold-out with validation disabled: 24 events / 8
  // The trained weights stayed near the initial model, far from a fresh start with the job's seed.
  absl::StatusOr<gan::TrainingState> fresh = gan::NewTrainingState(*tiny, 5);
  ASSERT_TRUE(fresh.ok());
  const double from_initial = Distance(*tuned->generator, *initial->generator);
  const double from_fresh = Distance(*tuned->generator, *fresh->generator);
  EXPECT_LT(from_initial * 5, from_fresh) << from_initial << " vs " << from_fresh;

  // An unknown initial checkpoint fails the rank, naming the field.
  v1::Assignment a = AssignmentFor(job_id, spec);
  a.set_initial_checkpoint_sha256(std::string(64, 'b'));
  run = Run(StandardFlags(WriteAssignment(a)));
  EXPECT_EQ(run.exit_code, 3);  // NOT_FOUND: kExitDataError
  const auto failed = run.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_FALSE(failed[0].result().success());
  EXPECT_NE(failed[0].result().message().find("initial_checkpoint_sha256"), std::string::npos)
      << failed[0].result().message();
}

// Fine-tuning a tiny-template model trained before the preset had template modes: the initial
// template's a and b are fine-tuned, the job's modes start as fitted to its data.
TEST_F(RankProcessTest, FineTuningKeepsTheInitialTemplateAndFitsTheModesItLacks) {
  absl::StatusOr<gan::ModelConfig> before_modes = gan::PresetConfig("tiny-template");
  ASSERT_TRUE(before_modes.ok());
  ASSERT_GT(before_modes->template_modes, 0);
  before_modes->template_modes = 0;
  absl::StatusOr<gan::TrainingState> initial = gan::NewTrainingState(*before_modes, 77);
  ASSERT_TRUE(initial.ok());
  {
    torch::NoGradGuard no_grad;
    initial->generator->named_parameters()["shower_template"].fill_(0.25);
  }
  v1::JobSpec spec = TinySpec();
  spec.set_model_preset("tiny-template");
  spec.mutable_hyper_parameters()->set_epochs(1);
  spec.mutable_hyper_parameters()->set_learning_rate(1e-6);
  spec.mutable_validation()->set_disabled(true);
  std::string job_id, sha256;
  RankRun run = FineTune(spec, *initial, &job_id, &sha256);
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text << run.Logs();
  runner::CheckpointClient client(server_->address(), RankCredential(job_id));
  const auto results = run.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].result().success()) << results[0].result().message();
  ASSERT_TRUE(client.Fetch(results[0].result().checkpoint_sha256(), dir_.File("tuned.ckpt")).ok());
  absl::StatusOr<gan::TrainingState> tuned = gan::ReadCheckpoint(dir_.File("tuned.ckpt"));
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  const at::Tensor t = tuned->generator->shower_template();
  ASSERT_EQ(t.size(0), 2 + tuned->config.template_modes);
  EXPECT_LT((t.narrow(0, 0, 2) - 0.25).abs().max().item<double>(), 0.01);  // a, b: the initial's
  for (int64_t k = 2; k < t.size(0); ++k) {
    EXPECT_GT(t[k].abs().max().item<double>(), 1e-4) << "mode " << k - 2 << " was not fitted";
  }

  // A tiny job (no template) cannot fine-tune a model with one: the rank fails, naming the fix.
  v1::JobSpec plain = TinySpec();
  plain.mutable_hyper_parameters()->set_epochs(1);
  plain.mutable_validation()->set_disabled(true);
  std::string plain_job, plain_sha;
  RankRun refused = FineTune(plain, *initial, &plain_job, &plain_sha);
  EXPECT_NE(refused.exit_code, 0);
  const auto refusals = refused.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(refusals.size(), 1u) << refused.Logs();
  EXPECT_FALSE(refusals[0].result().success());
  EXPECT_NE(refusals[0].result().message().find(
                "the initial model has a shower template and the job's preset has none"),
            std::string::npos)
      << refusals[0].result().message();
}

// A checkpoint from the server whose model config asks for an enormous network: the rank's
// sandboxed verification refuses it before anything is allocated in the rank, and the rank fails
// cleanly.
TEST_F(RankProcessTest, AHostileInitialCheckpointIsRefusedBeforeItIsLoaded) {
  std::string config = gan::SerializeModelConfig(*gan::PresetConfig("tiny"));
  const size_t line = config.find("generator_filters=");
  config.replace(line, config.find('\n', line) - line, "generator_filters=100000,100000,100000");
  torch::serialize::OutputArchive archive;
  at::Tensor bytes = at::empty({static_cast<int64_t>(config.size())}, at::kByte);
  std::memcpy(bytes.data_ptr<uint8_t>(), config.data(), config.size());
  archive.write("config", bytes);
  std::ostringstream payload;
  archive.save_to(payload);
  std::ofstream(dir_.File("hostile.ckpt"), std::ios::binary)
      << "GANTRY-CHECKPOINT 1\nsha256 " << gantry::Sha256Hex(payload.str()) << "\nbytes "
      << payload.str().size() << "\n"
      << payload.str();
  v1::JobSpec spec = TinySpec();
  spec.mutable_validation()->set_disabled(true);
  const std::string job_id = SubmitJob(spec);
  runner::CheckpointClient client(server_->address(), RankCredential(job_id));
  absl::StatusOr<runner::UploadedCheckpoint> uploaded =
      client.Upload(job_id, 0, 0, dir_.File("hostile.ckpt"));
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  v1::Assignment a = AssignmentFor(job_id, spec);
  a.set_initial_checkpoint_sha256(uploaded->sha256);
  RankRun run = Run(StandardFlags(WriteAssignment(a)));
  EXPECT_EQ(run.exit_code, 2) << run.stderr_text << run.Logs();  // INVALID_ARGUMENT: InvalidSpec
  const auto failed = run.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_FALSE(failed[0].result().success());
  const std::string& message = failed[0].result().message();
  EXPECT_NE(message.find("initial_checkpoint_sha256 " + uploaded->sha256), std::string::npos)
      << message;
  EXPECT_NE(message.find("generator_filters must be <= 512"), std::string::npos) << message;
  EXPECT_EQ(message.find("/proc/self/fd"), std::string::npos) << message;
}

// A free TCP port on loopback (bound and released; the rendezvous binds it right after).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST_F(RankProcessTest, SigtermStopsBothRanksOfAJobWithinSeconds) {
  v1::JobSpec spec = TinySpec();
  spec.set_world_size(2);
  spec.mutable_hyper_parameters()->set_batch_per_rank(4);
  spec.mutable_hyper_parameters()->set_epochs(1000);
  const std::string job_id = SubmitJob(spec);
  const int port = FreePort();
  std::atomic<pid_t> pids[2] = {0, 0};
  std::atomic<int64_t> sent_at_ns{0};
  RankRun runs[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    v1::Assignment a = AssignmentFor(job_id, spec);
    a.set_rank(rank);
    a.set_world_size(2);
    a.set_rendezvous_host("127.0.0.1");
    a.set_rendezvous_port(port);
    a.set_rendezvous_secret(std::string(64, 'c'));  // as the server sends it: keys under it
    const std::string tag = std::to_string(rank);
    std::vector<std::string> flags =
        StandardFlags(WriteAssignment(a, "assignment" + tag + ".pb"), tag);
    threads.emplace_back([&, rank, flags, tag] {
      runs[rank] = Run(
          flags,
          [&, rank](pid_t pid, const v1::WorkerMessage& m) {
            pids[rank] = pid;
            // Both ranks are cancelled (as their daemons do) once rank 0 has trained a step.
            if (rank == 0 && m.has_progress() && m.progress().step() >= 1 && pids[1] != 0 &&
                sent_at_ns == 0) {
              sent_at_ns = std::chrono::steady_clock::now().time_since_epoch().count();
              kill(pids[0], SIGTERM);
              kill(pids[1], SIGTERM);
            }
          },
          "rank" + tag);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_NE(sent_at_ns.load(), 0) << runs[0].Logs() << runs[0].stderr_text;
  const double after_signal =
      (std::chrono::steady_clock::now().time_since_epoch().count() - sent_at_ns.load()) / 1e9;
  EXPECT_LT(after_signal, 8.0);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(runs[rank].exit_code, 143)
        << "rank " << rank << ": " << runs[rank].stderr_text << runs[rank].Logs();
    EXPECT_TRUE(runs[rank].Of(v1::WorkerMessage::kResult).empty());  // cancelled: no result
    EXPECT_NE(runs[rank].Logs().find("cancelled"), std::string::npos) << runs[rank].Logs();
    EXPECT_EQ(runs[rank].Logs().find("ERROR"), std::string::npos) << runs[rank].Logs();
  }
}

// The sha256 in a log line "... (sha256 <sha>) ..." or "... sha256 <sha>, ...", after `marker`.
std::string ShaAfter(const std::string& logs, const std::string& marker) {
  const size_t line = logs.rfind(marker);
  if (line == std::string::npos) return "";
  const size_t line_start = logs.rfind('\n', line);
  const size_t at = logs.find("sha256 ", line_start == std::string::npos ? 0 : line_start);
  return at == std::string::npos ? "" : logs.substr(at + 7, 64);
}

// tiny-template: a restart refits the conditions (they must equal its checkpoint's) but takes the
// shower template from the checkpoint instead of fitting it again.
TEST_F(RankProcessTest, CheckpointAndStopThenResumeEqualsAnUninterruptedRun) {
  v1::JobSpec spec = TinySpec();
  spec.set_model_preset("tiny-template");
  spec.mutable_hyper_parameters()->set_epochs(6);  // one step per epoch (the test hook): 6
  spec.mutable_validation()->set_disabled(true);
  spec.mutable_checkpoint_policy()->set_every_epochs(0);
  spec.mutable_checkpoint_policy()->set_every_steps(2);
  spec.mutable_checkpoint_policy()->set_keep_last(2);

  auto flags = [&](const std::vector<std::string>& standard) {
    std::vector<std::string> out = standard;
    out.push_back("--max-steps-per-epoch=1");
    return out;
  };
  // Uninterrupted: uploads every 2 steps (in the background) and the final one at step 6.
  const std::string straight_id = SubmitJob(spec);
  RankRun straight = Run(
      flags(StandardFlags(WriteAssignment(AssignmentFor(straight_id, spec), "straight.pb"), "-s")),
      nullptr, "straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.stderr_text << straight.Logs();
  const std::string straight_logs = straight.Logs();
  for (int step : {2, 4, 6}) {
    EXPECT_NE(straight_logs.find(absl::StrCat("(step ", step, ") uploaded")), std::string::npos)
        << step << "\n"
        << straight_logs;
  }
  EXPECT_EQ(straight_logs.find("(step 3) uploaded"), std::string::npos) << straight_logs;
  EXPECT_NE(straight_logs.find("shower template: 2 modes fitted to"), std::string::npos)
      << straight_logs;
  const auto straight_results = straight.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(straight_results.size(), 1u);
  int local = 0;
  for (const auto& entry : fs::directory_iterator(dir_.File("work-s"))) {
    local += entry.path().extension() == ".ckpt" ? 1 : 0;
  }
  EXPECT_EQ(local, 2);  // keep_last

  // Interrupted: SIGUSR1 once epoch 2 is done; the rank checkpoints at the next step boundary,
  // uploads and exits 200 without a result.
  const std::string job_id = SubmitJob(spec);
  bool signalled = false;
  RankRun stopped = Run(
      flags(StandardFlags(WriteAssignment(AssignmentFor(job_id, spec), "first.pb"), "-a0")),
      [&](pid_t pid, const v1::WorkerMessage& m) {
        if (!signalled && m.has_progress() && m.progress().step() >= 2) {
          signalled = true;
          kill(pid, SIGUSR1);
        }
      },
      "attempt0");
  ASSERT_TRUE(signalled) << stopped.Logs();
  ASSERT_EQ(stopped.exit_code, 200) << stopped.stderr_text << stopped.Logs();
  EXPECT_TRUE(stopped.Of(v1::WorkerMessage::kResult).empty());
  EXPECT_EQ(stopped.Logs().find("ERROR"), std::string::npos) << stopped.Logs();
  const std::string resume_sha = ShaAfter(stopped.Logs(), "stopping for checkpoint-and-stop");
  ASSERT_EQ(resume_sha.size(), 64u) << stopped.Logs();

  // Attempt 1 resumes from that checkpoint and ends where the uninterrupted run ended.
  v1::Assignment again = AssignmentFor(job_id, spec);
  again.set_attempt(1);
  again.set_resume_checkpoint_sha256(resume_sha);
  RankRun resumed =
      Run(flags(StandardFlags(WriteAssignment(again, "second.pb"), "-a1")), nullptr, "attempt1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.stderr_text << resumed.Logs();
  const std::string logs = resumed.Logs();
  EXPECT_NE(logs.find("resumed from checkpoint " + resume_sha + " (epoch "), std::string::npos)
      << logs;
  EXPECT_NE(logs.find("conditions fitted to the data"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("shower template:"), std::string::npos) << logs;
  for (const auto& m : resumed.messages) EXPECT_EQ(m.attempt(), 1) << m.ShortDebugString();
  for (const auto& m : stopped.messages) EXPECT_EQ(m.attempt(), 0) << m.ShortDebugString();
  const auto progress = resumed.Of(v1::WorkerMessage::kProgress);
  ASSERT_FALSE(progress.empty());
  EXPECT_GT(progress.front().progress().step(), 2);
  EXPECT_EQ(progress.back().progress().step(), 6);
  const auto results = resumed.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].result().success()) << results[0].result().message();

  runner::CheckpointClient client(server_->address(), RankCredential(straight_id));
  // Attempt 0's credential expired with it: the live attempt's fetches.
  runner::CheckpointClient resumed_client(server_->address(), RankCredential(job_id, 1));
  ASSERT_TRUE(
      client.Fetch(straight_results[0].result().checkpoint_sha256(), dir_.File("straight.ckpt"))
          .ok());
  ASSERT_TRUE(
      resumed_client.Fetch(results[0].result().checkpoint_sha256(), dir_.File("resumed.ckpt"))
          .ok());
  absl::StatusOr<gan::TrainingState> a = gan::ReadCheckpoint(dir_.File("straight.ckpt"));
  absl::StatusOr<gan::TrainingState> b = gan::ReadCheckpoint(dir_.File("resumed.ckpt"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->step, 6);
  EXPECT_EQ(b->step, 6);
  const std::vector<gan::TensorDifference> diffs =
      gan::CompareTrainingStates(*a, *b, /*optimizers=*/true);
  for (const auto& d : diffs) EXPECT_TRUE(d.identical) << d.name << " " << d.max_abs_difference;
}

TEST_F(RankProcessTest, EveryMinutesSavesWhenThatLongPassedSinceTheLastSave) {
  v1::JobSpec spec = TinySpec();
  spec.mutable_hyper_parameters()->set_epochs(3);
  spec.mutable_validation()->set_disabled(true);
  spec.mutable_checkpoint_policy()->set_every_epochs(0);
  spec.mutable_checkpoint_policy()->set_every_minutes(0.0001);  // 6 ms: after every step
  const std::string job_id = SubmitJob(spec);
  std::vector<std::string> flags = StandardFlags(WriteAssignment(AssignmentFor(job_id, spec)));
  flags.push_back("--max-steps-per-epoch=1");
  RankRun run = Run(flags);
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text << run.Logs();
  for (int step : {1, 2, 3}) {
    EXPECT_NE(run.Logs().find(absl::StrCat("(step ", step, ") uploaded")), std::string::npos)
        << step << "\n"
        << run.Logs();
  }

  // No trigger: only the final checkpoint.
  spec.mutable_checkpoint_policy()->set_every_minutes(0);
  const std::string quiet_id = SubmitJob(spec);
  flags = StandardFlags(WriteAssignment(AssignmentFor(quiet_id, spec), "quiet.pb"), "-q");
  flags.push_back("--max-steps-per-epoch=1");
  run = Run(flags);
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text << run.Logs();
  EXPECT_EQ(run.Logs().find("(step 1) uploaded"), std::string::npos) << run.Logs();
  EXPECT_EQ(run.Logs().find("(step 2) uploaded"), std::string::npos) << run.Logs();
  EXPECT_NE(run.Logs().find("(step 3) uploaded"), std::string::npos) << run.Logs();
}

TEST_F(RankProcessTest, KeepBestScoresEveryCheckpointAndTheServerKeepsTheBest) {
  // Retention only marks expired checkpoints; the blob collector deletes them after its grace.
  StartServer({"--blob-gc-interval-ms=200", "--blob-gc-grace-ms=100"});
  v1::JobSpec spec = TinySpec();
  spec.mutable_hyper_parameters()->set_epochs(3);
  spec.mutable_checkpoint_policy()->set_every_epochs(1);
  spec.mutable_checkpoint_policy()->set_keep_last(1);
  spec.mutable_checkpoint_policy()->set_keep_best(true);
  // Scored by eprof, not the default fom (the field-standard figures need more hold-out events).
  spec.mutable_checkpoint_policy()->set_best_metric("eprof");
  const std::string job_id = SubmitJob(spec);
  std::vector<std::string> flags = StandardFlags(WriteAssignment(AssignmentFor(job_id, spec)));
  flags.push_back("--max-steps-per-epoch=1");
  RankRun run = Run(flags);
  ASSERT_EQ(run.exit_code, 0) << run.stderr_text << run.Logs();
  const std::string logs = run.Logs();
  const auto results = run.Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(results.size(), 1u) << logs;
  const v1::JobResult& result = results[0].result();
  ASSERT_TRUE(result.success()) << result.message();

  // Every upload (step 0, the untrained start; steps 1 and 2 periodic; 3 final) carries the fom of
  // a validation run before it.
  struct Upload {
    int64_t step;
    std::string sha256;
    double fom;
  };
  std::vector<Upload> uploads;
  std::istringstream lines(logs);
  for (std::string line; std::getline(lines, line);) {
    const size_t up = line.find(") uploaded: sha256 ");
    if (up == std::string::npos) continue;
    const size_t step_at = line.rfind("(step ", up);
    const size_t fom_at = line.find(", fom ", up);
    ASSERT_NE(step_at, std::string::npos) << line;
    ASSERT_NE(fom_at, std::string::npos) << "uploaded without a fom: " << line;
    uploads.push_back({std::stoll(line.substr(step_at + 6)), line.substr(up + 19, 64),
                       std::stod(line.substr(fom_at + 6))});
  }
  ASSERT_EQ(uploads.size(), 4u) << logs;
  size_t validations = 0;
  for (size_t at = logs.find("validation: "); at != std::string::npos;
       at = logs.find("validation: ", at + 1)) {
    ++validations;
  }
  EXPECT_EQ(validations, 4u) << "one per checkpoint; the final one's is the result's\n" << logs;
  for (size_t i = 0; i < uploads.size(); ++i) {
    EXPECT_EQ(uploads[i].step, static_cast<int64_t>(i));
    EXPECT_TRUE(std::isfinite(uploads[i].fom));
    EXPECT_GT(uploads[i].fom, 0);
  }
  EXPECT_EQ(uploads.back().sha256, result.checkpoint_sha256());
  const double eprof = result.metrics().at("eprof");
  EXPECT_NEAR(uploads.back().fom, eprof, 1e-6 * eprof);
  EXPECT_GT(std::abs(result.metrics().at("fom") - eprof), 1e-6) << "fom is not what was chosen";

  // The server recorded the fom: the job's latest checkpoint is the final one, with its fom.
  v1::GetJobRequest get;
  get.set_job_id(job_id);
  v1::Job job;
  ASSERT_TRUE(training_->GetJob(Ctx(tenant_).get(), get, &job).ok());
  ASSERT_TRUE(job.latest_checkpoint().has_fom()) << job.DebugString();
  EXPECT_EQ(job.latest_checkpoint().step(), 3);
  EXPECT_DOUBLE_EQ(job.latest_checkpoint().fom(), eprof);

  // Retention (keep_last 1 + keep_best): the latest and the lowest-fom checkpoint (the newest of
  // equals) stay; the others are gone.
  size_t best = 0;
  for (size_t i = 1; i < uploads.size(); ++i) {
    if (uploads[i].fom <= uploads[best].fom) best = i;
  }
  runner::CheckpointClient client(server_->address(), RankCredential(job_id));
  for (size_t i = 0; i < uploads.size(); ++i) {
    const bool kept = i == best || i + 1 == uploads.size();
    auto fetched = [&] {
      return client.Fetch(uploads[i].sha256, dir_.File(absl::StrCat("kept-", i, ".ckpt"))).ok();
    };
    if (kept) {
      EXPECT_TRUE(fetched()) << "step " << uploads[i].step << " fom " << uploads[i].fom;
    } else {
      EXPECT_TRUE(Eventually([&] { return !fetched(); }))
          << "step " << uploads[i].step << " fom " << uploads[i].fom << " (best: step "
          << uploads[best].step << ") is still there";
    }
  }
}

TEST_F(RankProcessTest, CheckpointAndStopBeforeTrainingExits200WithoutACheckpoint) {
  v1::JobSpec spec = TinySpec();
  const std::string job_id = SubmitJob(spec);
  bool signalled = false;
  RankRun run = Run(StandardFlags(WriteAssignment(AssignmentFor(job_id, spec))),
                    [&](pid_t pid, const v1::WorkerMessage& m) {
                      // The first log line comes before the dataset is materialised.
                      if (!signalled && m.has_log()) {
                        signalled = true;
                        kill(pid, SIGUSR1);
                      }
                    });
  ASSERT_TRUE(signalled);
  EXPECT_EQ(run.exit_code, 200) << run.stderr_text << run.Logs();
  EXPECT_NE(run.Logs().find("before training started: no checkpoint"), std::string::npos)
      << run.Logs();
  EXPECT_EQ(run.Logs().find("uploaded"), std::string::npos) << run.Logs();
  EXPECT_TRUE(run.Of(v1::WorkerMessage::kResult).empty());
  EXPECT_TRUE(run.Of(v1::WorkerMessage::kRankStatus).empty());  // never ran
}

TEST_F(RankProcessTest, CheckpointAndStopOfOneRankStopsBothAtTheSameStep) {
  v1::JobSpec spec = TinySpec();
  spec.set_world_size(2);
  spec.mutable_hyper_parameters()->set_batch_per_rank(4);
  spec.mutable_hyper_parameters()->set_epochs(1000);
  const std::string job_id = SubmitJob(spec);
  const int port = FreePort();
  std::atomic<pid_t> pids[2] = {0, 0};
  std::atomic<bool> sent{false};
  RankRun runs[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    v1::Assignment a = AssignmentFor(job_id, spec);
    a.set_rank(rank);
    a.set_world_size(2);
    a.set_attempt(3);
    a.set_rendezvous_host("127.0.0.1");
    a.set_rendezvous_port(port);
    const std::string tag = std::to_string(rank);
    std::vector<std::string> flags =
        StandardFlags(WriteAssignment(a, "assignment" + tag + ".pb"), tag);
    threads.emplace_back([&, rank, flags, tag] {
      runs[rank] = Run(
          flags,
          [&, rank](pid_t pid, const v1::WorkerMessage& m) {
            pids[rank] = pid;
            // Only rank 1 is told (its daemon drains); the ranks agree at the step boundary.
            if (rank == 0 && m.has_progress() && m.progress().step() >= 1 && pids[1] != 0 &&
                !sent.exchange(true)) {
              kill(pids[1], SIGUSR1);
            }
          },
          "rank" + tag);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(sent.load()) << runs[0].Logs() << runs[0].stderr_text;
  std::string shas[2];
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(runs[rank].exit_code, 200)
        << "rank " << rank << ": " << runs[rank].stderr_text << runs[rank].Logs();
    EXPECT_TRUE(runs[rank].Of(v1::WorkerMessage::kResult).empty());
    EXPECT_EQ(runs[rank].Logs().find("ERROR"), std::string::npos) << runs[rank].Logs();
    shas[rank] = ShaAfter(runs[rank].Logs(), "stopping for checkpoint-and-stop");
    EXPECT_EQ(shas[rank].size(), 64u) << runs[rank].Logs();
  }
  // Identical states at the same step.
  runner::CheckpointClient client(server_->address(), RankCredential(job_id, 3));
  std::vector<gan::TrainingState> states;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string path = dir_.File("stopped" + std::to_string(rank) + ".ckpt");
    ASSERT_TRUE(client.Fetch(shas[rank], path).ok()) << shas[rank];
    absl::StatusOr<gan::TrainingState> state = gan::ReadCheckpoint(path);
    ASSERT_TRUE(state.ok()) << state.status();
    states.push_back(*std::move(state));
  }
  EXPECT_EQ(states[0].step, states[1].step);
  EXPECT_GE(states[0].step, 1);
  EXPECT_EQ(states[0].epoch_cursor, states[1].epoch_cursor);
  EXPECT_TRUE(at::equal(states[0].rng.get_state(), states[1].rng.get_state()));
  ASSERT_TRUE(states[0].permutation.defined() && states[1].permutation.defined());
  EXPECT_TRUE(at::equal(states[0].permutation, states[1].permutation));
  for (const auto& d : gan::CompareTrainingStates(states[0], states[1], /*optimizers=*/true)) {
    EXPECT_TRUE(d.identical) << d.name << " " << d.max_abs_difference;
  }
}

TEST_F(RankProcessTest, ALostPeerEndsTheOtherRankWithARetryableExitCode) {
  v1::JobSpec spec = TinySpec();
  spec.set_world_size(2);
  spec.mutable_hyper_parameters()->set_batch_per_rank(4);
  spec.mutable_hyper_parameters()->set_epochs(1000);
  const std::string job_id = SubmitJob(spec);
  const int port = FreePort();
  std::atomic<pid_t> pids[2] = {0, 0};
  std::atomic<bool> killed{false};
  RankRun runs[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    v1::Assignment a = AssignmentFor(job_id, spec);
    a.set_rank(rank);
    a.set_world_size(2);
    a.set_rendezvous_host("127.0.0.1");
    a.set_rendezvous_port(port);
    a.set_collective_timeout_ms(15000);
    const std::string tag = std::to_string(rank);
    std::vector<std::string> flags =
        StandardFlags(WriteAssignment(a, "assignment" + tag + ".pb"), tag);
    threads.emplace_back([&, rank, flags, tag] {
      runs[rank] = Run(
          flags,
          [&, rank](pid_t pid, const v1::WorkerMessage& m) {
            pids[rank] = pid;
            // Rank 1 crashes (kill -9) once rank 0 has trained a step.
            if (rank == 0 && m.has_progress() && m.progress().step() >= 1 && pids[1] != 0 &&
                !killed.exchange(true)) {
              kill(pids[1], SIGKILL);
            }
          },
          "rank" + tag);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(killed.load()) << runs[0].Logs() << runs[0].stderr_text;
  EXPECT_EQ(runs[1].exit_code, 128 + SIGKILL);
  // The survivor's collectives fail: PeerLost (201), or CollectiveTimeout (202) if Gloo only
  // notices by waiting; either way retryable, and rank 0's failed result says which.
  const int code = runs[0].exit_code;
  EXPECT_TRUE(code == 201 || code == 202) << code << "\n" << runs[0].stderr_text << runs[0].Logs();
  const auto results = runs[0].Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(results.size(), 1u) << runs[0].Logs();
  EXPECT_FALSE(results[0].result().success());
  EXPECT_EQ(results[0].result().exit_code(), code);
  EXPECT_NE(runs[0].Logs().find("collective timeout 15s"), std::string::npos) << runs[0].Logs();
}

TEST_F(RankProcessTest, TwoRanksTrainDataParallelAsTwoProcesses) {
  v1::JobSpec spec = TinySpec();
  spec.set_world_size(2);
  spec.mutable_hyper_parameters()->set_batch_per_rank(4);  // global batch 8: 2 steps per epoch
  const std::string job_id = SubmitJob(spec);
  const int port = FreePort();
  RankRun runs[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    v1::Assignment a = AssignmentFor(job_id, spec);
    a.set_rank(rank);
    a.set_world_size(2);
    a.set_rendezvous_host("127.0.0.1");
    a.set_rendezvous_port(port);
    const std::string tag = std::to_string(rank);
    std::vector<std::string> flags =
        StandardFlags(WriteAssignment(a, "assignment" + tag + ".pb"), tag);
    threads.emplace_back(
        [this, &runs, rank, flags, tag] { runs[rank] = Run(flags, nullptr, "rank" + tag); });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(runs[rank].exit_code, 0)
        << "rank " << rank << ": " << runs[rank].stderr_text << runs[rank].Logs();
    const auto status = runs[rank].Of(v1::WorkerMessage::kRankStatus);
    ASSERT_EQ(status.size(), 1u);
    EXPECT_EQ(status[0].rank_status().rank(), rank);
    EXPECT_EQ(status[0].rank_status().phase(), v1::RANK_PHASE_RUNNING);
    // Rank 1 binds the interface that routes to the rendezvous host (loopback here).
    EXPECT_NE(runs[rank].Logs().find("(bind 127.0.0.1)"), std::string::npos) << runs[rank].Logs();
    EXPECT_NE(runs[rank].Logs().find("process group formed: 2 ranks"), std::string::npos)
        << runs[rank].Logs();
    EXPECT_NE(runs[rank].Logs().find("all-reduce:"), std::string::npos);
  }
  // Only rank 0 reports progress, checkpoints and the result.
  EXPECT_TRUE(runs[1].Of(v1::WorkerMessage::kProgress).empty());
  EXPECT_TRUE(runs[1].Of(v1::WorkerMessage::kResult).empty());
  const auto progress = runs[0].Of(v1::WorkerMessage::kProgress);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().progress().steps_per_epoch(), 2);
  EXPECT_EQ(progress.back().progress().step(), 4);
  EXPECT_EQ(progress.back().progress().epoch(), 2);
  const auto results = runs[0].Of(v1::WorkerMessage::kResult);
  ASSERT_EQ(results.size(), 1u);
  const v1::JobResult& result = results[0].result();
  ASSERT_TRUE(result.success()) << result.message();
  EXPECT_TRUE(result.metrics().contains("fom"));
  runner::CheckpointClient client(server_->address(), RankCredential(job_id));
  ASSERT_TRUE(client.Fetch(result.checkpoint_sha256(), dir_.File("dp.ckpt")).ok());
  absl::StatusOr<gan::TrainingState> state = gan::ReadCheckpoint(dir_.File("dp.ckpt"));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->step, 4);
}

TEST_F(RankProcessTest, SecondJobOnTheSameDatasetUsesTheWorkersCache) {
  v1::JobSpec spec = TinySpec();
  spec.mutable_hyper_parameters()->set_epochs(1);
  absl::StatusOr<showers::ToyMcConfig> toy = showers::ParseToyMcSpec(spec.dataset());
  ASSERT_TRUE(toy.ok());
  const std::string key = Sha256Hex(showers::FormatToyMcSpec(*toy));
  const std::string cached = dir_.File("cache") + "/datasets/" + key + ".h5";

  // The first job simulates the toy sample once and leaves it in the worker's cache.
  const std::string first_job = SubmitJob(spec);
  std::vector<std::string> flags = StandardFlags(WriteAssignment(AssignmentFor(first_job, spec)));
  flags.push_back("--cache-max-bytes=1073741824");
  RankRun first = Run(flags);
  ASSERT_EQ(first.exit_code, 0) << first.stderr_text << first.Logs();
  struct stat before;
  ASSERT_EQ(::stat(cached.c_str(), &before), 0) << first.Logs();

  // The second job on the same worker reuses it: the file is not written again.
  const std::string second_job = SubmitJob(spec);
  flags = StandardFlags(WriteAssignment(AssignmentFor(second_job, spec), "second.pb"));
  flags.push_back("--cache-max-bytes=1073741824");
  RankRun second = Run(flags, nullptr, "second");
  ASSERT_EQ(second.exit_code, 0) << second.stderr_text << second.Logs();
  struct stat after;
  ASSERT_EQ(::stat(cached.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_NE(second.Logs().find("from the cache"), std::string::npos) << second.Logs();
  EXPECT_EQ(first.Logs().find("from the cache"), std::string::npos) << first.Logs();
}

}  // namespace
}  // namespace gantry::testing
