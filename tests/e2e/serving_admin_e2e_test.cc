// AdminService.LoadModel / UnloadModel with real processes: a gantry-server on a fresh PostgreSQL
// database, a real gantry-worker daemon serving generation, and a real (untrained) tiny generator
// registered as physics/tiny:1.
// - Refusals: a non-admin token is PERMISSION_DENIED, an unknown model or worker NOT_FOUND, bad
//   batching settings INVALID_ARGUMENT.
// - LoadModel answers once the worker loaded and warmed the model: GetModel's readiness and
//   ListWorkers show it warm and pinned before any Generate, with its settings.
// - The settings take effect: max batch 4 is the largest batch the worker runs; a queue of one
//   request makes a second concurrent Generate RESOURCE_EXHAUSTED.
// - The pin survives a server restart and is re-applied by itself when the daemon comes back.
// - UnloadModel evicts it; a second UnloadModel is NOT_FOUND.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gantry/v1/admin.grpc.pb.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "tests/server/generation_fixture.h"
#include "tests/serving/torch_model.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

constexpr const char* kModel = "physics/tiny:1";

using ::gantry::testing::ReadFile;

class ServingAdminE2eTest : public GenerationFixture {
 protected:
  void SetUp() override {
    GenerationFixture::SetUp();
    const serving::testing::TorchModelFile file =
        serving::testing::WriteTorchModel("tiny", 11, dir_.File("tiny.ckpt"));
    tiny_sha_ = RegisterModel(token_, "tiny", ReadFile(file.path));
    ASSERT_EQ(tiny_sha_, file.sha256);
  }

  void TearDown() override {
    worker_.reset();
    GenerationFixture::TearDown();
  }

  void StartWorker() {
    worker_.reset();
    std::vector<std::string> argv = {GANTRY_WORKER_BINARY,
                                     "daemon",
                                     "--server=" + server_->address(),
                                     "--join-token-file=" + dir_.File("join"),
                                     "--name=g1",
                                     "--slots=1",
                                     "--threads=1",
                                     "--cache-dir=" + dir_.File("g1"),
                                     "--file-roots=/nonexistent",
                                     "--advertise-host=127.0.0.1"};
    worker_ = std::make_unique<ChildProcess>(argv, dir_.File("g1.log"));
    ASSERT_GT(worker_->pid(), 0);
  }

  std::string Logs() {
    return "--- g1\n" + (worker_ ? worker_->Log() : "") + "--- server\n" + server_->Stderr();
  }

  // The tiny model as the only worker reports it (empty when not loaded there).
  v1::WorkerModel TinyOnWorker() {
    v1::ListWorkersResponse response;
    const grpc::Status s = admin_->ListWorkers(Ctx(admin_token_).get(), {}, &response);
    EXPECT_TRUE(s.ok()) << Describe(s);
    for (const v1::WorkerInfo& w : response.workers()) {
      if (w.name() != "g1") continue;
      for (const v1::WorkerModel& m : w.loaded_models()) {
        if (m.checkpoint_sha256() == tiny_sha_) return m;
      }
    }
    return v1::WorkerModel();
  }

  v1::ModelReadiness Readiness() {
    v1::GetModelRequest get;
    get.set_model("tiny:1");
    v1::ModelVersion model;
    const grpc::Status s = catalog_->GetModel(Ctx(token_).get(), get, &model);
    EXPECT_TRUE(s.ok()) << Describe(s);
    return model.readiness();
  }

  static v1::LoadModelRequest Load(const std::string& model, int max_batch, int queue) {
    v1::LoadModelRequest r;
    r.set_model(model);
    r.mutable_batching()->set_max_batch_size(max_batch);
    r.mutable_batching()->set_max_queued_requests(queue);
    r.mutable_batching()->set_max_queue_delay_ms(1);
    r.mutable_batching()->set_priority_levels(3);
    return r;
  }

  grpc::Status CallLoad(const std::string& token, const v1::LoadModelRequest& request,
                        v1::LoadModelResponse* response) {
    return admin_->LoadModel(Ctx(token, 60000).get(), request, response);
  }

  // Runs `gantry --server ... --token <admin> ARGS` to its end; its exit code, *out its stdout.
  int RunCli(const std::string& name, const std::vector<std::string>& args, std::string* out) {
    std::string command = std::string("exec '") + GANTRY_CLI_BINARY + "' --server " +
                          server_->address() + " --token " + admin_token_;
    for (const std::string& a : args) command += " '" + a + "'";
    const std::string out_file = dir_.File(name + ".out");
    command += " >" + out_file + " 2>&1 </dev/null";
    ChildProcess cli({"/bin/sh", "-c", command}, dir_.File(name + ".log"));
    const int code = cli.Wait(60000);
    *out = ReadFile(out_file);
    return code;
  }

  std::string tiny_sha_;
  std::unique_ptr<ChildProcess> worker_;
};

TEST_F(ServingAdminE2eTest, LoadWarmsPinsAppliesSettingsSurvivesReconnectAndUnloads) {
  StartWorker();
  ASSERT_TRUE(Eventually([&] { return HealthStatus("gantry.v1.GenerationService") == 1; }, 30000))
      << Logs();

  // Refusals first: nothing is loaded by them.
  v1::LoadModelResponse response;
  EXPECT_EQ(CallLoad(token_, Load(kModel, 4, 1), &response).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(CallLoad(admin_token_, Load("physics/nope:1", 4, 1), &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::LoadModelRequest ghost = Load(kModel, 4, 1);
  ghost.add_workers("ghost");
  grpc::Status s = CallLoad(admin_token_, ghost, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  s = CallLoad(admin_token_, Load(kModel, 0, 1), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_NE(s.error_message().find("batching.max_batch_size"), std::string::npos) << Describe(s);
  v1::LoadModelRequest levels = Load(kModel, 4, 1);
  levels.mutable_batching()->set_priority_levels(11);
  EXPECT_EQ(CallLoad(admin_token_, levels, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(TinyOnWorker().checkpoint_sha256().empty());

  // Load: loaded and warm on g1 when it answers.
  s = CallLoad(admin_token_, Load(kModel, 4, 1), &response);
  ASSERT_TRUE(s.ok()) << Describe(s) << Logs();
  EXPECT_EQ(response.model_ref(), "tiny:1");
  ASSERT_EQ(response.workers_size(), 1) << response.DebugString();
  EXPECT_EQ(response.workers(0).worker_name(), "g1");
  EXPECT_TRUE(response.workers(0).loaded()) << response.DebugString();
  EXPECT_TRUE(response.workers(0).warm());
  EXPECT_EQ(response.warm_workers(), 1);
  EXPECT_EQ(response.workers(0).batching().max_batch_size(), 4);
  EXPECT_EQ(response.workers(0).batching().max_queued_requests(), 1);
  EXPECT_EQ(response.workers(0).batching().priority_levels(), 3);

  // Before any Generate: warm and pinned in GetModel's readiness and in ListWorkers.
  v1::ModelReadiness readiness;
  ASSERT_TRUE(Eventually(
      [&] {
        readiness = Readiness();
        return readiness.warm() && readiness.loaded_on_size() == 1 &&
               readiness.loaded_on(0).pinned();
      },
      10000))
      << readiness.DebugString();
  EXPECT_EQ(readiness.loaded_on(0).worker_name(), "g1");
  v1::WorkerModel on_worker = TinyOnWorker();
  EXPECT_TRUE(on_worker.warm());
  EXPECT_TRUE(on_worker.pinned());
  EXPECT_EQ(on_worker.batching().max_batch_size(), 4);
  EXPECT_EQ(on_worker.largest_batch(), 1);  // the warm-up batch

  // Max batch: 40 showers run in batches of at most 4.
  Generated g = Generate(token_, ListRequest("tiny:1", std::vector<double>(40, 50.0), 5), 60000);
  ASSERT_TRUE(g.status.ok()) << Describe(g.status) << Logs();
  EXPECT_EQ(g.showers(), 40);
  ASSERT_TRUE(Eventually([&] { return TinyOnWorker().largest_batch() == 4; }, 10000))
      << TinyOnWorker().DebugString();

  // Queue of one request: a long request held open (one chunk read) fills it.
  v1::GenerateRequest big;
  big.set_model("tiny:1");
  big.mutable_range()->mutable_energy_gev()->set_min(20);
  big.mutable_range()->mutable_energy_gev()->set_max(80);
  big.mutable_range()->set_count(50000);
  big.set_seed(9);
  big.set_chunk_showers(4);
  big.set_priority(2);
  auto ctx = Ctx(token_, 120000);
  auto reader = generation_->Generate(ctx.get(), big);
  v1::GenerateChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk)) << Logs();
  g = Generate(token_, ListRequest("tiny:1", {50.0}, 6), 20000);
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(g.status);
  EXPECT_NE(g.status.error_message().find("max_queued_requests"), std::string::npos)
      << Describe(g.status);
  ctx->TryCancel();
  reader->Finish().IgnoreError();
  reader.reset();
  // A priority outside 0..9 is refused by the server.
  v1::GenerateRequest bad = ListRequest("tiny:1", {50.0}, 6);
  bad.set_priority(10);
  g = Generate(token_, bad, 20000);
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(g.status);

  // The daemon dies, the server restarts (the pin is in PostgreSQL) and the daemon comes back (a
  // new process, nothing loaded): the new server applies the stored pin again, with its settings,
  // without another LoadModel.
  ASSERT_GE(worker_->Signal(SIGKILL, 10000), -100);
  RestartServer({"--max-showers-per-request", "100000"});
  StartWorker();
  ASSERT_TRUE(Eventually(
      [&] {
        const v1::WorkerModel m = TinyOnWorker();
        return m.pinned() && m.warm() && m.batching().max_batch_size() == 4;
      },
      40000))
      << TinyOnWorker().DebugString() << Logs();

  // The CLI: unload, load again on the named worker with other settings, unload.
  std::string out;
  ASSERT_EQ(RunCli("unload1", {"admin", "models", "unload", kModel}, &out), 0) << out;
  EXPECT_NE(out.find("tiny:1: unpinned"), std::string::npos) << out;
  ASSERT_TRUE(Eventually([&] { return TinyOnWorker().checkpoint_sha256().empty(); }, 10000));
  ASSERT_EQ(RunCli("load",
                   {"admin", "models", "load", kModel, "--workers", "g1", "--max-batch", "2",
                    "--queue", "8"},
                   &out),
            0)
      << out << Logs();
  EXPECT_NE(out.find("tiny:1: warm on 1 of 1 worker(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("batch 2, delay"), std::string::npos) << out;
  EXPECT_NE(RunCli("bad", {"admin", "models", "load", kModel, "--max-batch", "5000"}, &out), 0);
  EXPECT_NE(out.find("max_batch_size"), std::string::npos) << out;
  ASSERT_TRUE(Eventually([&] { return TinyOnWorker().batching().max_batch_size() == 2; }, 10000))
      << TinyOnWorker().DebugString();

  // Unload: gone from the worker and from the readiness; a second unload has nothing to do.
  v1::UnloadModelRequest unload;
  unload.set_model(kModel);
  v1::UnloadModelResponse unloaded;
  s = admin_->UnloadModel(Ctx(token_).get(), unload, &unloaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  s = admin_->UnloadModel(Ctx(admin_token_, 30000).get(), unload, &unloaded);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(unloaded.model_ref(), "tiny:1");
  ASSERT_EQ(unloaded.workers_size(), 1) << unloaded.DebugString();
  EXPECT_FALSE(unloaded.workers(0).loaded());
  ASSERT_TRUE(Eventually([&] { return TinyOnWorker().checkpoint_sha256().empty(); }, 10000))
      << TinyOnWorker().DebugString();
  EXPECT_EQ(Readiness().loaded_on_size(), 0);
  s = admin_->UnloadModel(Ctx(admin_token_, 30000).get(), unload, &unloaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
}

}  // namespace
}  // namespace gantry::testing
