// End to end: a real gantry-server on a fresh PostgreSQL database, two real gantry-worker daemons
// (one slot, one thread each) and their rank processes. A tiny 3DGAN is trained data-parallel
// (world_size 2) on toy Monte Carlo, validated and registered; cancellation, a lost worker and a
// failing rank end jobs with the right state and free the slots.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gantry/v1/admin.grpc.pb.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "gantry/v1/training.grpc.pb.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using std::chrono::seconds;
using std::chrono::steady_clock;

class TrainingE2eTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    join_token_file_ = dir_.path() + "/join-token";
    gantry::testing::WriteSecretFile(join_token_file_, "e2e-join-token-0123456789abcdef\n");
    // Short heartbeats and lease so a lost worker is noticed within seconds.
    // file:// datasets under /nonexistent (the failing-rank case) for tenant "physics".
    StartServer({"--join-token-file", join_token_file_, "--heartbeat-interval-ms", "300",
                 "--lease-timeout-ms", "8000", "--file-dataset-roots=/nonexistent",
                 "--file-dataset-tenants=physics"});
    token_ = NewTenant("physics");
  }

  void TearDown() override {
    workers_.clear();
    ServerFixture::TearDown();
  }

  // A daemon named `name` with one slot and one thread per rank; its rendezvous ports are kept
  // apart from other daemons (and other tests) by `port_base`.
  void StartWorker(const std::string& name, int port_base) {
    const std::string cache = dir_.path() + "/" + name;
    std::vector<std::string> argv = {
        GANTRY_WORKER_BINARY,
        "daemon",
        "--server=" + server_->address(),
        "--join-token-file=" + join_token_file_,
        "--name=" + name,
        "--slots=1",
        "--threads=1",
        "--labels=zone=" + name,
        "--cache-dir=" + cache,
        "--file-roots=/nonexistent",
        "--advertise-host=127.0.0.1",
        "--rendezvous-ports=" + std::to_string(port_base) + "-" + std::to_string(port_base + 20)};
    auto worker = std::make_unique<ChildProcess>(argv, dir_.path() + "/" + name + ".log");
    ASSERT_GT(worker->pid(), 0);
    workers_[name] = std::move(worker);
  }

  // Daemons "w1" and "w2" (ports from port_base and port_base + 30), both connected and idle.
  void StartTwoWorkers(int port_base) {
    StartWorker("w1", port_base);
    StartWorker("w2", port_base + 30);
    WaitForFreeWorkers(2);
  }

  // Waits until `n` workers are connected with all their slots free.
  void WaitForFreeWorkers(int n, int timeout_s = 30) {
    const auto until = steady_clock::now() + seconds(timeout_s);
    int free = 0;
    while (steady_clock::now() < until) {
      v1::ListWorkersRequest request;
      v1::ListWorkersResponse response;
      free = 0;
      if (admin_->ListWorkers(Ctx(admin_token_).get(), request, &response).ok()) {
        for (const v1::WorkerInfo& w : response.workers()) {
          free += w.connected() && w.free_slots() == w.slots();
        }
      }
      if (free >= n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    FAIL() << free << " of " << n << " workers connected and idle after " << timeout_s << " s\n"
           << WorkerLogs();
  }

  std::string WorkerLogs() {
    std::string all;
    for (auto& [name, w] : workers_) all += "--- " + name + "\n" + w->Log();
    return all + "--- server\n" + server_->Stderr();
  }

  v1::JobSpec TinySpec(int epochs) {
    v1::JobSpec spec;
    spec.set_display_name("e2e-tiny");
    spec.set_model_preset("tiny");
    spec.set_dataset("toymc:layout=25,events=160,seed=5,emin=20,emax=200");
    spec.mutable_hyper_parameters()->set_epochs(epochs);
    spec.mutable_hyper_parameters()->set_batch_per_rank(8);
    spec.mutable_hyper_parameters()->set_seed(11);
    spec.set_world_size(2);
    spec.mutable_validation()->set_holdout_fraction(0.2);
    return spec;
  }

  v1::Job Submit(const v1::JobSpec& spec) { return SubmitJob(token_, spec); }
  v1::Job Get(const std::string& id) { return GetJob(token_, id); }
  v1::Job WaitForState(const std::string& id, v1::JobState state, int timeout_s) {
    return WaitForJob(token_, id, state, timeout_s * 1000);
  }

  std::string join_token_file_;
  std::string token_;
  std::map<std::string, std::unique_ptr<ChildProcess>> workers_;
};

TEST_F(TrainingE2eTest, TrainsDataParallelRegistersTheModelAndFineTunesIt) {
  StartTwoWorkers(29610);
  v1::Job job = Submit(TinySpec(2));

  // Follow the job the way `gantry jobs watch` does: the stream ends when the job ends.
  v1::WatchJobRequest watch;
  watch.set_job_id(job.id());
  auto ctx = Ctx(token_, 300000);
  auto reader = training_->WatchJob(ctx.get(), watch);
  std::vector<v1::JobState> states;
  int progress_events = 0, checkpoints = 0;
  std::string registered;
  v1::JobEvent event;
  while (reader->Read(&event)) {
    if (event.has_state_change()) states.push_back(event.state_change().to());
    if (event.has_progress()) {
      ++progress_events;
      EXPECT_EQ(event.progress().epochs(), 2);
      EXPECT_GT(event.progress().steps_per_epoch(), 0);
      EXPECT_TRUE(event.progress().losses().count("d_loss")) << event.DebugString();
    }
    if (event.has_checkpoint_saved()) ++checkpoints;
    if (event.has_model_registered()) registered = event.model_registered().model_ref();
  }
  ASSERT_TRUE(reader->Finish().ok());
  job = Get(job.id());
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << WorkerLogs();
  const std::vector<v1::JobState> expected = {v1::JOB_STATE_QUEUED, v1::JOB_STATE_PLACING,
                                              v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED};
  EXPECT_EQ(states, expected);
  EXPECT_GE(progress_events, 1);
  EXPECT_GE(checkpoints, 1);
  EXPECT_EQ(registered, "e2e-tiny:1");
  EXPECT_EQ(job.model_ref(), "e2e-tiny:1");

  v1::GetModelRequest get;
  get.set_model(job.model_ref());
  v1::ModelVersion model;
  grpc::Status s = catalog_->GetModel(Ctx(token_).get(), get, &model);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(model.owner(), "physics");
  EXPECT_EQ(model.lineage().job_id(), job.id());
  EXPECT_EQ(model.lineage().world_size(), 2);
  EXPECT_EQ(model.lineage().model_preset(), "tiny");
  EXPECT_EQ(model.lineage().dataset(), job.spec().dataset());
  EXPECT_EQ(model.lineage().dataset_sha256().size(), 64u);
  EXPECT_FALSE(model.lineage().code_version().empty());
  EXPECT_EQ(model.lineage().hyper_parameters().at("seed"), "11");
  // Resolved by the rank: the tiny preset's learning rate, not the spec's 0 ("preset default").
  EXPECT_EQ(model.lineage().hyper_parameters().at("learning_rate"), "0.001");
  EXPECT_EQ(model.lineage().hyper_parameters().at("batch_per_rank"), "8");
  for (const char* metric : {"mre_sampling_fraction", "eprof", "pos", "fom"}) {
    ASSERT_TRUE(model.metrics().count(metric)) << metric << "\n" << model.DebugString();
    EXPECT_GE(model.metrics().at(metric), 0.0) << metric;
  }
  EXPECT_GT(model.histograms_size(), 0);
  EXPECT_GE(model.energy_range_gev().min(), 20.0);
  EXPECT_LE(model.energy_range_gev().max(), 200.0);

  // The registered checkpoint is the stored blob, byte for byte.
  v1::FetchCheckpointRequest fetch;
  fetch.set_sha256(model.checkpoint_sha256());
  std::ifstream token_in(join_token_file_);
  std::string join;
  token_in >> join;
  // The join token only registers: a worker reads registered models' checkpoints with its own
  // credential (this one registers and never connects).
  v1::RegisterRequest reg;
  reg.set_name("e2e-checkpoint-reader");
  reg.set_slots(1);
  reg.set_advertise_host("127.0.0.1");
  v1::RegisterResponse checkpoint_reader;
  ASSERT_TRUE(worker_->Register(Ctx(join).get(), reg, &checkpoint_reader).ok());
  {
    auto jctx = Ctx(join, 60000);
    auto refused = worker_->FetchCheckpoint(jctx.get(), fetch);
    v1::CheckpointChunk ignored;
    while (refused->Read(&ignored)) {
    }
    EXPECT_EQ(refused->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  auto fctx = Ctx(checkpoint_reader.worker_credential(), 60000);
  auto chunks = worker_->FetchCheckpoint(fctx.get(), fetch);
  int64_t bytes = 0;
  v1::CheckpointChunk chunk;
  while (chunks->Read(&chunk)) bytes += chunk.data().size();
  ASSERT_TRUE(chunks->Finish().ok());
  EXPECT_EQ(bytes, model.checkpoint_size_bytes());

  // Both slots come back.
  WaitForFreeWorkers(2);

  // Fine-tuning it: the ranks' credentials fetch the model their job starts from (and no other
  // registered model), train and register the next version.
  v1::JobSpec tune = TinySpec(1);
  tune.set_initial_model(job.model_ref());
  const v1::Job tuned = WaitForState(Submit(tune).id(), v1::JOB_STATE_SUCCEEDED, 300);
  ASSERT_EQ(tuned.state(), v1::JOB_STATE_SUCCEEDED) << tuned.DebugString() << WorkerLogs();
  EXPECT_EQ(tuned.model_ref(), "e2e-tiny:2");
  get.set_model(tuned.model_ref());
  ASSERT_TRUE(catalog_->GetModel(Ctx(token_).get(), get, &model).ok());
  EXPECT_EQ(model.lineage().parent_model(), "e2e-tiny:1");
}

TEST_F(TrainingE2eTest, CancellationStopsEveryRankAndFreesTheSlots) {
  StartTwoWorkers(29670);
  v1::Job job = Submit(TinySpec(10000));
  job = WaitForState(job.id(), v1::JOB_STATE_RUNNING, 120);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.DebugString() << WorkerLogs();

  v1::CancelJobRequest cancel;
  cancel.set_job_id(job.id());
  cancel.set_reason("e2e");
  v1::Job cancelled;
  ASSERT_TRUE(training_->CancelJob(Ctx(token_).get(), cancel, &cancelled).ok());
  const auto start = steady_clock::now();
  job = WaitForState(job.id(), v1::JOB_STATE_CANCELLED, 30);
  const double took = std::chrono::duration<double>(steady_clock::now() - start).count();
  ASSERT_EQ(job.state(), v1::JOB_STATE_CANCELLED) << job.DebugString() << WorkerLogs();
  EXPECT_LT(took, 15.0) << "all ranks should stop within seconds";
  EXPECT_EQ(job.reason(), "Cancelled");
  WaitForFreeWorkers(2, 15);
}

TEST_F(TrainingE2eTest, ALostWorkerFailsItsJobAndAGangIsNeverPartial) {
  StartTwoWorkers(29730);
  // Three ranks cannot fit on two one-slot workers: the job waits, nothing is leased.
  v1::JobSpec big = TinySpec(1);
  big.set_world_size(3);
  v1::Job waiting = Submit(big);

  v1::Job job = Submit(TinySpec(10000));
  job = WaitForState(job.id(), v1::JOB_STATE_RUNNING, 120);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.DebugString() << WorkerLogs();
  EXPECT_EQ(Get(waiting.id()).state(), v1::JOB_STATE_QUEUED);

  // Freeze one daemon (a hung machine or a network partition): its heartbeats stop, its rank
  // keeps running, and the lease expires (8 s here).
  const pid_t frozen = workers_["w2"]->pid();
  ASSERT_EQ(kill(frozen, SIGSTOP), 0);
  job = WaitForState(job.id(), v1::JOB_STATE_FAILED, 30);
  kill(frozen, SIGCONT);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED) << job.DebugString() << WorkerLogs();
  EXPECT_EQ(job.reason(), "WorkerLost");
  EXPECT_NE(job.message().find("w2"), std::string::npos) << job.message();
  EXPECT_EQ(Get(waiting.id()).state(), v1::JOB_STATE_QUEUED);
  // The thawed daemon comes back without a restart: it reconnects, is told to stop the rank of the
  // failed job, and both workers end up idle and usable.
  WaitForFreeWorkers(2, 60);
  EXPECT_TRUE(workers_["w2"]->Running());
}

TEST_F(TrainingE2eTest, AKilledDaemonTakesItsRanksAndTheJobFails) {
  StartTwoWorkers(29850);
  v1::Job job = Submit(TinySpec(10000));
  job = WaitForState(job.id(), v1::JOB_STATE_RUNNING, 120);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.DebugString() << WorkerLogs();
  // kill -9: the kernel kills its rank too, so the surviving rank loses its peer at once; whichever
  // is noticed first (rank 0's failure report or the lost lease) ends the job FAILED.
  ASSERT_EQ(workers_["w2"]->Signal(SIGKILL, 10000), 128 + SIGKILL);
  job = WaitForState(job.id(), v1::JOB_STATE_FAILED, 60);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED) << job.DebugString() << WorkerLogs();
  // max_restarts 0: the first failure ends the job, whichever is seen first.
  EXPECT_TRUE(job.reason() == "WorkerLost" || job.reason() == "PeerLost" ||
              job.reason() == "RankFailed" || job.reason() == "CollectiveTimeout")
      << job.reason();
  WaitForFreeWorkers(1, 40);
}

TEST_F(TrainingE2eTest, AFailingRankFailsTheJobWithItsReason) {
  StartTwoWorkers(29790);
  v1::JobSpec spec = TinySpec(1);
  spec.set_dataset("file:///nonexistent/e2e-showers.h5");
  v1::Job job = Submit(spec);
  job = WaitForState(job.id(), v1::JOB_STATE_FAILED, 120);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED) << job.DebugString() << WorkerLogs();
  // A missing file is a permanent failure (exit code 3), whichever rank reports it first.
  EXPECT_EQ(job.reason(), "DatasetError");
  EXPECT_NE(job.message().find("e2e-showers.h5"), std::string::npos) << job.message();
  WaitForFreeWorkers(2, 30);
}

}  // namespace
}  // namespace gantry::testing
