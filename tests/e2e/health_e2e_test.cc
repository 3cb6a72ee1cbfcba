// Health, worker reports and the CLI's waiting commands with real processes: a gantry-server on a
// fresh PostgreSQL database and a real gantry-worker daemon.
// - GenerationService is NOT_SERVING with no worker, SERVING once the daemon joined, NOT_SERVING
//   again after it is killed.
// - `gantry jobs submit --wait` of a tiny job exits 0 with the job SUCCEEDED while `gantry jobs
// logs
//   --follow` prints its log lines and ends with it; ListWorkers shows the job's running rank.
// - A Generate held open: ListWorkers shows the loaded model (owner/name:version, warm) and the
//   generation queue depth; GetModel's readiness names the worker.
// - `gantry jobs submit --wait` of a job that fails exits 1.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gantry/v1/admin.grpc.pb.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "gantry/v1/generation.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

constexpr int kServing = 1;
constexpr int kNotServing = 2;
constexpr const char* kGeneration = "gantry.v1.GenerationService";

using ::gantry::testing::ReadFile;

class HealthE2eTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    join_token_file_ = dir_.path() + "/join-token";
    gantry::testing::WriteSecretFile(join_token_file_, "e2e-health-join-token-0123456789abcdef\n");
    StartServer({"--join-token-file", join_token_file_, "--heartbeat-interval-ms", "300",
                 "--lease-timeout-ms", "8000", "--health-check-interval-ms", "200",
                 "--file-dataset-roots=/nonexistent", "--file-dataset-tenants=physics"});
    token_ = NewTenant("physics");
  }

  void TearDown() override {
    for (auto& c : cli_) c.reset();
    worker_.reset();
    ServerFixture::TearDown();
  }

  void StartWorker() {
    std::vector<std::string> argv = {GANTRY_WORKER_BINARY,
                                     "daemon",
                                     "--server=" + server_->address(),
                                     "--join-token-file=" + join_token_file_,
                                     "--name=h1",
                                     "--slots=1",
                                     "--threads=1",
                                     "--cache-dir=" + dir_.path() + "/h1",
                                     "--file-roots=/nonexistent",
                                     "--advertise-host=127.0.0.1",
                                     "--rendezvous-ports=29760-29780"};
    worker_ = std::make_unique<ChildProcess>(argv, dir_.path() + "/h1.log");
    ASSERT_GT(worker_->pid(), 0);
  }

  std::string Logs() {
    return "--- h1\n" + (worker_ ? worker_->Log() : "") + "--- server\n" + server_->Stderr();
  }

  // Starts `gantry --server ... --token ... ARGS` in the background, stdout and stderr to
  // <dir>/<name>.out and .err; returns its index in cli_.
  size_t StartCli(const std::string& name, const std::vector<std::string>& args,
                  const std::string& token = "") {
    std::string command = std::string("exec '") + GANTRY_CLI_BINARY + "' --server " +
                          server_->address() + " --token " + (token.empty() ? token_ : token);
    for (const std::string& a : args) command += " '" + a + "'";
    command += " >" + Out(name) + " 2>" + Err(name) + " </dev/null";
    cli_.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{"/bin/sh", "-c", command}, dir_.path() + "/" + name + ".log"));
    return cli_.size() - 1;
  }
  std::string Out(const std::string& name) { return dir_.path() + "/" + name + ".out"; }
  std::string Err(const std::string& name) { return dir_.path() + "/" + name + ".err"; }

  std::vector<std::string> TinyJobArgs(const std::string& name) {
    return {"jobs",
            "submit",
            "--wait",
            "--name",
            name,
            "--preset",
            "tiny",
            "--dataset",
            "toymc:layout=25,events=64,seed=5,emin=20,emax=200",
            "--epochs",
            "2",
            "--batch",
            "8",
            "--world-size",
            "1",
            "--seed",
            "3",
            "--threads",
            "1",
            "--no-validation"};
  }

  v1::WorkerInfo OnlyWorker() {
    v1::ListWorkersResponse response;
    const grpc::Status s = admin_->ListWorkers(Ctx(admin_token_).get(), {}, &response);
    EXPECT_TRUE(s.ok()) << Describe(s);
    return response.workers_size() == 1 ? response.workers(0) : v1::WorkerInfo();
  }

  std::string join_token_file_;
  std::string token_;
  std::unique_ptr<ChildProcess> worker_;
  std::vector<std::unique_ptr<ChildProcess>> cli_;
};

TEST_F(HealthE2eTest, HealthWorkerReportsReadinessAndWaitingCommands) {
  EXPECT_EQ(HealthStatus(""), kServing);
  EXPECT_EQ(HealthStatus(kGeneration), kNotServing) << "no worker yet";
  StartWorker();
  ASSERT_TRUE(Eventually([&] { return HealthStatus(kGeneration) == kServing; }, 30000)) << Logs();

  // A tiny job through `jobs submit --wait`, its logs followed by `jobs logs --follow`.
  const size_t submit = StartCli("submit", TinyJobArgs("health-tiny"));
  std::string job_id;
  ASSERT_TRUE(Eventually(
      [&] {
        const std::string err = ReadFile(Err("submit"));
        const size_t at = err.find("submitted job-");
        if (at == std::string::npos) return false;
        job_id = err.substr(at + 10, err.find(';', at) - at - 10);
        return true;
      },
      20000))
      << ReadFile(Err("submit"));
  const size_t follow = StartCli("follow", {"jobs", "logs", job_id, "--follow"});
  // While it trains, the worker reports its rank.
  EXPECT_TRUE(Eventually(
      [&] {
        const v1::WorkerInfo w = OnlyWorker();
        return w.running_ranks_size() == 1 && w.running_ranks(0).job_id() == job_id &&
               w.running_ranks(0).rank() == 0;
      },
      60000))
      << OnlyWorker().DebugString();
  const int submit_code = cli_[submit]->Wait(240000);
  const std::string submit_out = ReadFile(Out("submit")), submit_err = ReadFile(Err("submit"));
  ASSERT_EQ(submit_code, 0) << submit_out << submit_err << Logs();
  EXPECT_NE(submit_out.find("SUCCEEDED"), std::string::npos) << submit_out;
  EXPECT_NE(submit_err.find("RUNNING"), std::string::npos) << "progress lines: " << submit_err;
  // --follow ends by itself once the job ended, having printed the job's log lines.
  const int follow_code = cli_[follow]->Wait(20000);
  const std::string followed = ReadFile(Out("follow"));
  EXPECT_EQ(follow_code, 0) << followed << ReadFile(Err("follow"));
  EXPECT_NE(followed.find("[rank 0] "), std::string::npos) << followed;
  v1::GetJobLogsRequest logs_request;
  logs_request.set_job_id(job_id);
  logs_request.set_rank(-1);
  v1::GetJobLogsResponse logs;
  ASSERT_TRUE(training_->GetJobLogs(Ctx(token_).get(), logs_request, &logs).ok());
  ASSERT_GT(logs.lines_size(), 0);
  EXPECT_NE(followed.find(logs.lines(logs.lines_size() - 1).text()), std::string::npos)
      << "the last stored line is printed too:\n"
      << followed;
  const v1::Job job = GetJob(token_, job_id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(Eventually([&] { return OnlyWorker().running_ranks_size() == 0; }, 10000));

  // A Generate held open (one chunk read, the rest waiting): the worker reports the model loaded
  // and showers queued.
  v1::GenerateRequest generate;
  generate.set_model(job.model_ref());
  generate.mutable_range()->mutable_energy_gev()->set_min(50);
  generate.mutable_range()->mutable_energy_gev()->set_max(100);
  generate.mutable_range()->set_count(20000);
  generate.set_seed(7);
  generate.set_chunk_showers(16);
  auto ctx = Ctx(token_, 120000);
  auto reader = generation_->Generate(ctx.get(), generate);
  v1::GenerateChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk)) << Logs();
  v1::WorkerInfo w;
  EXPECT_TRUE(Eventually(
      [&] {
        w = OnlyWorker();
        return w.loaded_models_size() == 1 && w.loaded_models(0).warm() &&
               w.generation_queued_showers() > 0 && w.generation_active_requests() == 1;
      },
      20000))
      << w.DebugString();
  ASSERT_EQ(w.loaded_models_size(), 1);
  ASSERT_EQ(w.loaded_models(0).models_size(), 1);
  EXPECT_EQ(w.loaded_models(0).models(0), "physics/" + job.model_ref());
  EXPECT_GT(w.loaded_models(0).queued_showers(), 0);
  EXPECT_GT(w.loaded_models(0).memory_bytes(), 0);
  EXPECT_TRUE(w.has_reported_at());

  // The table of `gantry admin workers` shows the same.
  const size_t workers = StartCli("workers", {"admin", "workers"}, admin_token_);
  EXPECT_EQ(cli_[workers]->Wait(30000), 0) << ReadFile(Err("workers"));
  const std::string table = ReadFile(Out("workers"));
  EXPECT_NE(table.find("physics/" + job.model_ref() + " (warm)"), std::string::npos) << table;
  EXPECT_NE(table.find(" calls"), std::string::npos) << table;

  v1::GetModelRequest get;
  get.set_model(job.model_ref());
  v1::ModelVersion model;
  ASSERT_TRUE(catalog_->GetModel(Ctx(token_).get(), get, &model).ok());
  ASSERT_EQ(model.readiness().loaded_on_size(), 1) << model.readiness().DebugString();
  EXPECT_EQ(model.readiness().loaded_on(0).worker_id(), w.id());
  EXPECT_EQ(model.readiness().loaded_on(0).worker_name(), "h1");
  EXPECT_TRUE(model.readiness().warm());
  EXPECT_EQ(model.readiness().serving_workers(), 1);
  ctx->TryCancel();
  reader->Finish().IgnoreError();
  reader.reset();

  // A job that fails on the worker (its file:// dataset does not exist there): exit code 1.
  std::vector<std::string> failing = TinyJobArgs("health-fails");
  failing[8] = "file:///nonexistent/health-showers.h5";
  const size_t fails = StartCli("fails", failing);
  const int fails_code = cli_[fails]->Wait(120000);
  const std::string fails_err = ReadFile(Err("fails"));
  EXPECT_EQ(fails_code, 1) << ReadFile(Out("fails")) << fails_err << Logs();
  EXPECT_NE(fails_err.find("ended FAILED"), std::string::npos) << fails_err;
  EXPECT_NE(ReadFile(Out("fails")).find("FAILED"), std::string::npos);

  // The worker dies: nobody serves generation, and its reports are gone.
  worker_->Signal(SIGKILL, 10000);
  EXPECT_TRUE(Eventually([&] { return HealthStatus(kGeneration) == kNotServing; }, 20000));
  EXPECT_EQ(HealthStatus(""), kServing);
  EXPECT_TRUE(Eventually([&] { return OnlyWorker().loaded_models_size() == 0; }, 10000));
}

}  // namespace
}  // namespace gantry::testing
