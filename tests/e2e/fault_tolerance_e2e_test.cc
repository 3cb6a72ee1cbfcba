// Fault tolerance end to end: a real gantry-server on PostgreSQL, three real gantry-worker daemons
// (one slot, one thread each) and their rank processes. Each fault below happens mid-training and
// the job still ends SUCCEEDED with a registered model: kill -9 of a daemon (the job resumes from its
// checkpoint on the idle third daemon, and its final weights are bit-identical to an uninterrupted
// run's), SIGTERM preemption (not counted against max_restarts), a SIGSTOPped rank (the progress
// watchdog restarts the job) and kill -9 of the server while the job is RESTARTING. A permanent
// failure ends FAILED without a restart.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gantry/v1/admin.grpc.pb.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "gantry/v1/training.grpc.pb.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/support/child_process.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using std::chrono::seconds;
using std::chrono::steady_clock;

// Pids whose parent is `parent` (the rank processes of a daemon).
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return children;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(atoi(entry->d_name));
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so parse after the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) children.push_back(pid);
  }
  closedir(proc);
  return children;
}

class FaultToleranceE2eTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    join_token_file_ = dir_.path() + "/join-token";
    std::ofstream(join_token_file_) << "e2e-join-token-0123456789abcdef\n";
    StartGantryServer("");
    token_ = NewTenant("physics");
  }

  void TearDown() override {
    workers_.clear();
    ServerFixture::TearDown();
  }

  // Short heartbeats and lease so a lost worker is noticed within seconds; a short progress
  // watchdog and rank exit grace so hangs end quickly. `listen` = "" picks a free port.
  void StartGantryServer(const std::string& listen) {
    std::vector<std::string> args = {"--join-token-file",     join_token_file_,
                                     "--heartbeat-interval-ms", "300",
                                     "--lease-timeout-ms",      "3000",
                                     "--hang-timeout-seconds",  "20",
                                     "--hang-step-factor",      "4",
                                     "--rank-exit-grace-seconds", "10"};
    if (!listen.empty()) args.push_back("--listen=" + listen);
    StartServer(args);
  }

  void StartWorker(const std::string& name, int port_base) {
    std::vector<std::string> argv = {
        GANTRY_WORKER_BINARY,
        "daemon",
        "--server=" + server_->address(),
        "--join-token-file=" + join_token_file_,
        "--name=" + name,
        "--slots=1",
        "--threads=1",
        "--cache-dir=" + dir_.path() + "/" + name,
        "--advertise-host=127.0.0.1",
        "--kill-grace-ms=2000",
        "--preemption-grace-ms=60000",
        "--rendezvous-ports=" + std::to_string(port_base) + "-" + std::to_string(port_base + 20)};
    auto worker = std::make_unique<ChildProcess>(argv, dir_.path() + "/" + name + ".log");
    ASSERT_GT(worker->pid(), 0);
    workers_[name] = std::move(worker);
  }

  void WaitForFreeWorkers(int n, int timeout_s = 60) {
    const auto until = steady_clock::now() + seconds(timeout_s);
    int free = 0;
    while (steady_clock::now() < until) {
      v1::ListWorkersResponse response;
      free = 0;
      if (admin_->ListWorkers(Ctx(admin_token_).get(), {}, &response).ok()) {
        for (const v1::WorkerInfo& w : response.workers()) {
          free += w.connected() && w.free_slots() == w.slots() && !w.draining();
        }
      }
      if (free >= n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    FAIL() << free << " of " << n << " workers connected and idle after " << timeout_s << " s\n"
           << Logs();
  }

  std::string Logs() {
    std::string all;
    for (auto& [name, w] : workers_) all += "--- " + name + "\n" + w->Log();
    return all + "--- server\n" + server_->Stderr();
  }

  // A small job: 64 training events, batch 4 per rank on 2 ranks (8 steps an epoch), 3 epochs,
  // a checkpoint every 4 steps, fixed seed, one thread per rank.
  v1::JobSpec Spec(int max_restarts) {
    v1::JobSpec spec;
    spec.set_display_name("e2e-faults");
    spec.set_model_preset("tiny");
    spec.set_dataset("toymc:layout=25,events=80,seed=5,emin=20,emax=200");
    spec.mutable_hyper_parameters()->set_epochs(3);
    spec.mutable_hyper_parameters()->set_batch_per_rank(4);
    spec.mutable_hyper_parameters()->set_seed(11);
    spec.mutable_resources_per_rank()->set_threads(1);
    spec.set_world_size(2);
    spec.set_max_restarts(max_restarts);
    spec.mutable_checkpoint_policy()->set_every_steps(4);
    spec.mutable_validation()->set_holdout_fraction(0.2);
    spec.mutable_validation()->set_showers_per_bin(20);
    return spec;
  }

  v1::Job Submit(const v1::JobSpec& spec) { return SubmitJob(token_, spec); }
  v1::Job Get(const std::string& id) { return GetJob(token_, id); }
  v1::Job WaitForState(const std::string& id, v1::JobState state, int timeout_s) {
    return WaitForJob(token_, id, state, timeout_s * 1000);
  }
  // Waits until the job has an uploaded checkpoint.
  v1::Job WaitForCheckpoint(const std::string& id, int timeout_s) {
    const auto until = steady_clock::now() + seconds(timeout_s);
    v1::Job job = Get(id);
    while (job.latest_checkpoint().sha256().empty() && steady_clock::now() < until &&
           job.state() != v1::FAILED && job.state() != v1::SUCCEEDED) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      job = Get(id);
    }
    return job;
  }

  // The job's events (the job has ended, so the stream closes).
  std::vector<v1::JobEvent> Events(const std::string& id) {
    v1::WatchJobRequest request;
    request.set_job_id(id);
    auto ctx = Ctx(token_, 10000);
    auto reader = training_->WatchJob(ctx.get(), request);
    std::vector<v1::JobEvent> events;
    v1::JobEvent event;
    while (reader->Read(&event)) events.push_back(event);
    return events;
  }
  std::vector<v1::Restart> Restarts(const std::string& id) {
    std::vector<v1::Restart> restarts;
    for (const v1::JobEvent& e : Events(id)) {
      if (e.has_restart()) restarts.push_back(e.restart());
    }
    return restarts;
  }

  // Downloads the registered model's checkpoint to `path`.
  void FetchModelCheckpoint(const v1::Job& job, const std::string& path) {
    v1::GetModelRequest get;
    get.set_model(job.model_ref());
    v1::ModelVersion model;
    ASSERT_TRUE(catalog_->GetModel(Ctx(token_).get(), get, &model).ok()) << job.model_ref();
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer e2e-join-token-0123456789abcdef");
    v1::FetchCheckpointRequest request;
    request.set_sha256(model.checkpoint_sha256());
    auto reader = worker_->FetchCheckpoint(&ctx, request);
    std::ofstream out(path, std::ios::binary);
    v1::CheckpointChunk chunk;
    while (reader->Read(&chunk)) out << chunk.data();
    ASSERT_TRUE(reader->Finish().ok());
  }

  // Exit code of `gantry-worker checkpoint-diff a b` (0: identical parameters and buffers).
  int CheckpointDiff(const std::string& a, const std::string& b) {
    ChildProcess diff({GANTRY_WORKER_BINARY, "checkpoint-diff", a, b},
                      dir_.path() + "/checkpoint-diff.log");
    const int code = diff.Wait(60000);
    if (code != 0) std::cerr << diff.Log();
    return code;
  }

  std::string join_token_file_;
  std::string token_;
  std::map<std::string, std::unique_ptr<ChildProcess>> workers_;
};

TEST_F(FaultToleranceE2eTest, AKilledDaemonsJobResumesElsewhereWithIdenticalWeights) {
  StartWorker("w1", 31100);
  StartWorker("w2", 31130);
  WaitForFreeWorkers(2);
  // The reference: the same job, uninterrupted.
  v1::Job reference = Submit(Spec(2));
  reference = WaitForState(reference.id(), v1::SUCCEEDED, 600);
  ASSERT_EQ(reference.state(), v1::SUCCEEDED) << reference.DebugString() << Logs();
  WaitForFreeWorkers(2);

  StartWorker("w3", 31160);  // idle until the restart
  WaitForFreeWorkers(3);
  v1::Job job = Submit(Spec(2));
  job = WaitForState(job.id(), v1::RUNNING, 300);
  ASSERT_EQ(job.state(), v1::RUNNING) << job.DebugString() << Logs();
  job = WaitForCheckpoint(job.id(), 300);
  ASSERT_FALSE(job.latest_checkpoint().sha256().empty()) << job.DebugString() << Logs();
  // kill -9 of a daemon running a rank (the kernel takes its rank with it).
  std::string victim;
  for (const std::string& w : job.assigned_workers()) {
    if (victim.empty() && workers_.count(w)) victim = w;
  }
  if (victim.empty()) victim = "w2";
  ASSERT_EQ(workers_[victim]->Signal(SIGKILL, 10000), 128 + SIGKILL);
  const auto killed = steady_clock::now();
  job = WaitForState(job.id(), v1::RESTARTING, 60);
  ASSERT_EQ(job.state(), v1::RESTARTING) << job.DebugString() << Logs();
  job = WaitForState(job.id(), v1::RUNNING, 120);
  ASSERT_EQ(job.state(), v1::RUNNING) << job.DebugString() << Logs();
  std::cerr << "kill -9 to RUNNING again: "
            << std::chrono::duration<double>(steady_clock::now() - killed).count() << " s\n";
  job = WaitForState(job.id(), v1::SUCCEEDED, 600);
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << job.DebugString() << Logs();
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_EQ(job.attempt(), 1);
  std::vector<v1::Restart> restarts = Restarts(job.id());
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_TRUE(restarts[0].reason() == "WorkerLost" || restarts[0].reason() == "PeerLost" ||
              restarts[0].reason() == "RankFailed")
      << restarts[0].reason();
  EXPECT_FALSE(restarts[0].resumed_from_sha256().empty()) << "resumed from a checkpoint";
  EXPECT_GT(restarts[0].resumed_from_step(), 0) << "not from zero";

  // The resumed run's final weights equal the uninterrupted run's, bit for bit.
  const std::string a = dir_.path() + "/reference.ckpt", b = dir_.path() + "/resumed.ckpt";
  FetchModelCheckpoint(reference, a);
  FetchModelCheckpoint(job, b);
  EXPECT_EQ(CheckpointDiff(a, b), 0) << "the resumed job's weights differ from the reference's";
}

TEST_F(FaultToleranceE2eTest, APreemptedDaemonCheckpointsAndTheJobMovesWithoutCounting) {
  StartWorker("w1", 31200);
  StartWorker("w2", 31230);
  WaitForFreeWorkers(2);
  v1::Job job = Submit(Spec(0));  // max_restarts 0: a preemption is not a failure
  job = WaitForState(job.id(), v1::RUNNING, 300);
  ASSERT_EQ(job.state(), v1::RUNNING) << job.DebugString() << Logs();
  StartWorker("w3", 31260);
  WaitForFreeWorkers(1);
  // SIGTERM (a spot VM reclaim or a node drain): the daemon's rank checkpoints, then it exits.
  const std::string victim = job.assigned_workers_size() > 1 && workers_.count(job.assigned_workers(1))
                                 ? job.assigned_workers(1)
                                 : "w2";
  ASSERT_EQ(workers_[victim]->Signal(SIGTERM, 60000), 0) << Logs();
  job = WaitForState(job.id(), v1::SUCCEEDED, 600);
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << job.DebugString() << Logs();
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.attempt(), 1);
  std::vector<v1::Restart> restarts = Restarts(job.id());
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].reason(), "Preempted");
  EXPECT_FALSE(restarts[0].counted());
  EXPECT_FALSE(restarts[0].resumed_from_sha256().empty())
      << "the preempted rank's checkpoint is resumed from";
  EXPECT_EQ(restarts[0].redone_steps(), 0) << "a preemption checkpoint loses no step";
}

TEST_F(FaultToleranceE2eTest, AStoppedRankIsCaughtByTheWatchdogAndTheJobRestarts) {
  StartWorker("w1", 31300);
  StartWorker("w2", 31330);
  WaitForFreeWorkers(2);
  v1::JobSpec spec = Spec(2);
  spec.mutable_hyper_parameters()->set_epochs(4);
  v1::Job job = Submit(spec);
  job = WaitForState(job.id(), v1::RUNNING, 300);
  ASSERT_EQ(job.state(), v1::RUNNING) << job.DebugString() << Logs();
  job = WaitForCheckpoint(job.id(), 300);
  // SIGSTOP one rank: its peer blocks in the next all-reduce, no step is reported any more.
  std::vector<pid_t> ranks = ChildrenOf(workers_["w2"]->pid());
  ASSERT_EQ(ranks.size(), 1u) << Logs();
  ASSERT_EQ(kill(ranks[0], SIGSTOP), 0);
  const auto stopped = steady_clock::now();
  job = WaitForState(job.id(), v1::RESTARTING, 120);
  const double caught = std::chrono::duration<double>(steady_clock::now() - stopped).count();
  ASSERT_EQ(job.state(), v1::RESTARTING) << job.DebugString() << Logs();
  EXPECT_TRUE(job.reason() == "NoProgress" || job.reason() == "CollectiveTimeout") << job.reason();
  // The limit is max(20 s, 4 x the median step time) after the last reported step, which rank 0
  // reports every few seconds.
  EXPECT_LT(caught, 60.0) << "bounded: --hang-timeout-seconds 20, --hang-step-factor 4";
  job = WaitForState(job.id(), v1::SUCCEEDED, 600);
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << job.DebugString() << Logs();
  EXPECT_EQ(job.restarts(), 1);
  // The stopped rank ignored SIGTERM; the daemon's SIGKILL after its kill grace took it.
  EXPECT_NE(kill(ranks[0], 0), 0) << "the stopped rank " << ranks[0] << " is still there";
}

TEST_F(FaultToleranceE2eTest, KillingTheServerWhileAJobRestartsLosesNothing) {
  StartWorker("w1", 31400);
  StartWorker("w2", 31430);
  WaitForFreeWorkers(2);
  v1::Job job = Submit(Spec(2));
  job = WaitForState(job.id(), v1::RUNNING, 300);
  ASSERT_EQ(job.state(), v1::RUNNING) << job.DebugString() << Logs();
  job = WaitForCheckpoint(job.id(), 300);
  // w2 dies; with no third worker the job waits in RESTARTING for a second free slot.
  ASSERT_EQ(workers_["w2"]->Signal(SIGKILL, 10000), 128 + SIGKILL);
  job = WaitForState(job.id(), v1::RESTARTING, 60);
  ASSERT_EQ(job.state(), v1::RESTARTING) << job.DebugString() << Logs();
  // kill -9 of the server mid-restart, then the same server (database, port) again.
  const std::string address = server_->address();
  server_->Kill();
  StartGantryServer(address);
  StartWorker("w2", 31430);  // the machine comes back
  job = WaitForState(job.id(), v1::SUCCEEDED, 600);
  ASSERT_EQ(job.state(), v1::SUCCEEDED) << job.DebugString() << Logs();
  EXPECT_EQ(job.restarts(), 1) << "finishing the interrupted restart is not another one";
  EXPECT_FALSE(job.model_ref().empty());
}

TEST_F(FaultToleranceE2eTest, APermanentFailureEndsFailedWithoutRestarting) {
  StartWorker("w1", 31500);
  StartWorker("w2", 31530);
  WaitForFreeWorkers(2);
  v1::JobSpec spec = Spec(3);
  spec.set_dataset("file:///nonexistent/e2e-showers.h5");
  v1::Job job = Submit(spec);
  job = WaitForState(job.id(), v1::FAILED, 120);
  ASSERT_EQ(job.state(), v1::FAILED) << job.DebugString() << Logs();
  EXPECT_EQ(job.reason(), "DatasetError");
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.attempt(), 0);
  EXPECT_NE(job.message().find("e2e-showers.h5"), std::string::npos) << job.message();
}

}  // namespace
}  // namespace gantry::testing
