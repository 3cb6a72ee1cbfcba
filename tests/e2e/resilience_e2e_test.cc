// End to end through outages: a real gantry-server, two real gantry-worker daemons and their rank
// processes train a tiny 3DGAN (world_size 2) while the server is killed with SIGKILL and
// restarted, or while PostgreSQL is stopped for 20 s; the job still ends SUCCEEDED with its model
// registered (no acknowledged message is lost: the daemons keep them until the server stored them).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gantry/v1/admin.grpc.pb.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "gantry/v1/training.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"
#include "tests/support/private_postgres.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using std::chrono::seconds;
using std::chrono::steady_clock;

class ResilienceE2eTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    join_token_file_ = dir_.path() + "/join-token";
    gantry::testing::WriteSecretFile(join_token_file_, "e2e-resilience-join-token-0123456789\n");
  }

  void TearDown() override {
    workers_.clear();
    ServerFixture::TearDown();
  }

  // The server for workers: fast heartbeats, a lease long enough for the daemons to come back
  // after a restart (their reconnect backoff grows to 5 s).
  void StartWorkerServer(const std::string& listen = "") {
    std::vector<std::string> args = {"--join-token-file",       join_token_file_,
                                     "--heartbeat-interval-ms", "300",
                                     "--lease-timeout-ms",      "15000"};
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
        "--rendezvous-ports=" + std::to_string(port_base) + "-" + std::to_string(port_base + 20)};
    auto worker = std::make_unique<ChildProcess>(argv, dir_.path() + "/" + name + ".log");
    ASSERT_GT(worker->pid(), 0);
    workers_[name] = std::move(worker);
  }

  void StartTwoWorkers(int port_base) {
    StartWorker("w1", port_base);
    StartWorker("w2", port_base + 30);
    const auto until = steady_clock::now() + seconds(30);
    int connected = 0;
    while (steady_clock::now() < until && connected < 2) {
      v1::ListWorkersResponse response;
      connected = 0;
      if (admin_->ListWorkers(Ctx(admin_token_).get(), {}, &response).ok()) {
        for (const v1::WorkerInfo& w : response.workers()) connected += w.connected();
      }
      if (connected < 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ASSERT_EQ(connected, 2) << WorkerLogs();
  }

  std::string WorkerLogs() {
    std::string all;
    for (auto& [name, w] : workers_) all += "--- " + name + "\n" + w->Log();
    return all + "--- server\n" + (server_ != nullptr ? server_->Stderr() : "");
  }

  // The tiny preset on toy Monte Carlo, as TrainingE2eTest::TinySpec; `epochs` sets the length.
  static v1::JobSpec TinySpec(int epochs) {
    v1::JobSpec spec;
    spec.set_display_name("e2e-resilient");
    spec.set_model_preset("tiny");
    spec.set_dataset("toymc:layout=25,events=160,seed=5,emin=20,emax=200");
    spec.mutable_hyper_parameters()->set_epochs(epochs);
    spec.mutable_hyper_parameters()->set_batch_per_rank(8);
    spec.mutable_hyper_parameters()->set_seed(11);
    spec.set_world_size(2);
    spec.mutable_validation()->set_holdout_fraction(0.2);
    return spec;
  }

  // The job ended SUCCEEDED and its model is in the catalog.
  void ExpectSucceededAndRegistered(const std::string& job_id) {
    v1::Job job = WaitForJob(token_, job_id, v1::JOB_STATE_SUCCEEDED, 300000);
    ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << WorkerLogs();
    EXPECT_EQ(job.model_ref(), "e2e-resilient:1");
    v1::GetModelRequest get;
    get.set_model(job.model_ref());
    v1::ModelVersion model;
    const grpc::Status s = catalog_->GetModel(Ctx(token_).get(), get, &model);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_EQ(model.lineage().job_id(), job_id);
    EXPECT_FALSE(model.checkpoint_sha256().empty());
  }

  std::string JobLogText(const std::string& job_id) {
    v1::GetJobLogsRequest request;
    request.set_job_id(job_id);
    request.set_rank(-1);
    v1::GetJobLogsResponse response;
    const grpc::Status s = training_->GetJobLogs(Ctx(token_).get(), request, &response);
    EXPECT_TRUE(s.ok()) << Describe(s);
    std::string text;
    for (const v1::LogLine& line : response.lines()) text += line.text() + "\n";
    return text;
  }

  // 20 to 120 s of training for two ranks with one thread each on two shared cores (8 steps an
  // epoch, 10 to 60 s each depending on the load): the outage starts mid-job, and may or may not
  // last until the result (both must end well).
  static constexpr int kEpochs = 2;

  std::unique_ptr<PrivatePostgres> pg_;  // outlives the server (stopped in TearDown)
  std::string join_token_file_;
  std::string token_;
  std::map<std::string, std::unique_ptr<ChildProcess>> workers_;
};

TEST_F(ResilienceE2eTest, AServerKilledMidJobIsRestartedAndTheJobSucceeds) {
  StartWorkerServer();
  token_ = NewTenant("physics");
  StartTwoWorkers(30500);
  const v1::Job submitted = SubmitJob(token_, TinySpec(kEpochs));
  v1::Job job = WaitForJob(token_, submitted.id(), v1::JOB_STATE_RUNNING, 120000);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.DebugString() << WorkerLogs();
  std::this_thread::sleep_for(seconds(5));

  // kill -9 mid-job: the ranks train on, their messages wait in the daemons.
  const std::string address = server_->address();
  channel_.reset();
  training_.reset();
  admin_.reset();
  catalog_.reset();
  server_->Kill();
  std::this_thread::sleep_for(seconds(3));
  StartWorkerServer(address);
  ASSERT_EQ(server_->address(), address);

  ExpectSucceededAndRegistered(submitted.id());
  // The restarted server took the job over from the reconnecting daemons.
  EXPECT_NE(JobLogText(submitted.id()).find("adopted after a server restart"), std::string::npos)
      << WorkerLogs();
}

TEST_F(ResilienceE2eTest, PostgresStoppedFor20SecondsMidJobAndTheJobSucceeds) {
  // A PostgreSQL of this test's own: the shared test server must stay up for the other tests.
  pg_ = std::make_unique<PrivatePostgres>();
  PrivatePostgres& pg = *pg_;
  ASSERT_FALSE(pg.dsn().empty());
  server_dsn_ = pg.dsn();
  StartWorkerServer();
  token_ = NewTenant("physics");
  StartTwoWorkers(30600);
  const v1::Job submitted = SubmitJob(token_, TinySpec(kEpochs));
  v1::Job job = WaitForJob(token_, submitted.id(), v1::JOB_STATE_RUNNING, 120000);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.DebugString() << WorkerLogs();
  std::this_thread::sleep_for(seconds(3));

  ASSERT_TRUE(pg.Stop());
  std::this_thread::sleep_for(seconds(20));
  ASSERT_TRUE(pg.Start());

  ExpectSucceededAndRegistered(submitted.id());
  const std::string server_log = server_->Stderr();
  // The outage was felt and ridden out: heartbeats went unstored, no stream was dropped.
  EXPECT_NE(server_log.find("keeping its lease in memory"), std::string::npos) << server_log;
  for (auto& [name, worker] : workers_) {
    EXPECT_TRUE(worker->Running()) << name;
    EXPECT_EQ(worker->Log().find("(stream 2"), std::string::npos) << name << "\n" << WorkerLogs();
  }
  // What the ranks reported during the outage waited in the server and was stored afterwards.
  EXPECT_NE(server_log.find("the database is back; storing"), std::string::npos) << server_log;
}

}  // namespace
}  // namespace gantry::testing
