// WorkerPoolFixture: a real gantry-server on a fresh PostgreSQL database and gantry-worker daemons
// started by name (one slot, one thread each), with what fault-tolerance tests and benchmarks need:
// waiting for idle workers, small job specs, a job's checkpoint and events, the registered model's
// checkpoint file, `gantry-worker checkpoint-diff`, and the rank processes of a daemon.
// GANTRY_WORKER_BINARY must be defined by the including target.
#ifndef GANTRY_TESTS_E2E_WORKER_POOL_FIXTURE_H_
#define GANTRY_TESTS_E2E_WORKER_POOL_FIXTURE_H_

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gantry/v1/admin.grpc.pb.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "gantry/v1/training.grpc.pb.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"

namespace gantry::testing {

namespace v1 = ::gantry::v1;
using std::chrono::seconds;
using std::chrono::steady_clock;

// Pids whose parent is `parent` (the rank processes of a daemon).
inline std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return children;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
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

class WorkerPoolFixture : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    join_token_file_ = dir_.path() + "/join-token";
    gantry::testing::WriteSecretFile(join_token_file_, "e2e-join-token-0123456789abcdef\n");
    StartGantryServer(server_listen_);
    token_ = NewTenant("physics");
  }

  void TearDown() override {
    workers_.clear();
    ServerFixture::TearDown();
  }

  // Short heartbeats and lease so a lost worker is noticed within seconds; a short progress
  // watchdog and rank exit grace so hangs end quickly. `listen` = "" picks a free port.
  void StartGantryServer(const std::string& listen) {
    std::vector<std::string> args = {"--join-token-file",
                                     join_token_file_,
                                     "--heartbeat-interval-ms",
                                     "300",
                                     "--lease-timeout-ms",
                                     "8000",
                                     "--hang-timeout-seconds",
                                     "20",
                                     "--hang-step-factor",
                                     "4",
                                     "--rank-exit-grace-seconds",
                                     "10",
                                     "--file-dataset-roots=/nonexistent",
                                     "--file-dataset-tenants=physics"};
    if (!listen.empty()) args.push_back("--listen=" + listen);
    args.insert(args.end(), server_extra_args_.begin(), server_extra_args_.end());
    StartServer(args);
  }

  void StartWorker(const std::string& name, int port_base) {
    std::vector<std::string> argv = {
        GANTRY_WORKER_BINARY,
        "daemon",
        "--server=" +
            (worker_server_address_.empty() ? server_->address() : worker_server_address_),
        "--join-token-file=" + join_token_file_,
        "--name=" + name,
        "--slots=1",
        "--threads=1",
        "--cache-dir=" + dir_.path() + "/" + name,
        "--file-roots=/nonexistent",
        "--advertise-host=127.0.0.1",
        "--kill-grace-ms=2000",
        "--preemption-grace-ms=60000",
        "--rendezvous-ports=" + std::to_string(port_base) + "-" + std::to_string(port_base + 20)};
    argv.insert(argv.end(), worker_extra_args_.begin(), worker_extra_args_.end());
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

  // A small job: 64 training events, batch 4 per rank on 2 ranks (8 steps an epoch), 2 epochs,
  // a checkpoint every 4 steps, fixed seed, one thread per rank.
  v1::JobSpec Spec(int max_restarts) {
    v1::JobSpec spec;
    spec.set_display_name("e2e-faults");
    spec.set_model_preset("tiny");
    spec.set_dataset("toymc:layout=25,events=80,seed=5,emin=20,emax=200");
    spec.mutable_hyper_parameters()->set_epochs(2);
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
           job.state() != v1::JOB_STATE_FAILED && job.state() != v1::JOB_STATE_SUCCEEDED) {
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
    // Any registered worker may read a model's checkpoint: register one that never connects.
    v1::RegisterRequest reg;
    reg.set_name(absl::StrCat("e2e-checkpoint-reader-", model.checkpoint_sha256().substr(0, 12)));
    reg.set_slots(1);
    reg.set_threads_per_rank(1);
    reg.set_advertise_host("127.0.0.1");
    v1::RegisterResponse registered;
    grpc::ClientContext rctx;
    rctx.AddMetadata("authorization", "Bearer e2e-join-token-0123456789abcdef");
    ASSERT_TRUE(worker_->Register(&rctx, reg, &registered).ok());
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + registered.worker_credential());
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

  // The server's --listen for SetUp; "" = a free loopback port.
  std::string server_listen_;
  // More server flags for SetUp, and the address daemons are given as --server ("" = the server's
  // address), e.g. a worker listener.
  std::vector<std::string> server_extra_args_;
  std::string worker_server_address_;
  std::vector<std::string> worker_extra_args_;  // more daemon flags for StartWorker, e.g. --labels
  std::string join_token_file_;
  std::string token_;
  std::map<std::string, std::unique_ptr<ChildProcess>> workers_;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_E2E_WORKER_POOL_FIXTURE_H_
