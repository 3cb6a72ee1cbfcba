// The real `gantry-worker daemon` process serving generation, against a scripted WorkerService
// on loopback (records Register and heartbeats, serves FetchCheckpoint from a local file): the
// register carries the endpoint and a per-process secret, Generate works with that secret and
// fetches the checkpoint once into <cache-dir>/models (reused after a restart), heartbeats list
// the loaded model, --serve-port=-1 turns serving off. The whole path through the real
// gantry-server is tests/e2e's generation test.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/serving/torch_model.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace gantry::serving {
namespace {

namespace v1 = ::gantry::v1;
constexpr char kToken[] = "serving-join-token";
// The worker credential Register hands out: Connect and FetchCheckpoint take only it.
constexpr char kCredential[] = "gwc_serving-worker-credential";

class ScriptedServer final : public v1::WorkerService::Service {
 public:
  explicit ScriptedServer(testing::TorchModelFile model) : model_(std::move(model)) {}

  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override {
    if (!Authorized(context, kToken)) return grpc::Status(grpc::UNAUTHENTICATED, "bad join token");
    absl::MutexLock lock(&mu_);
    registers_.push_back(*request);
    response->set_worker_id("worker-" + request->name());
    response->set_worker_credential(kCredential);
    response->set_heartbeat_interval_ms(200);
    response->set_lease_timeout_ms(5000);
    return grpc::Status::OK;
  }

  grpc::Status Connect(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ServerMessage, v1::WorkerMessage>* stream) override {
    if (!Authorized(context, kCredential))
      return grpc::Status(grpc::UNAUTHENTICATED, "bad worker credential");
    v1::WorkerMessage m;
    while (stream->Read(&m)) {
      if (m.has_heartbeat()) {
        absl::MutexLock lock(&mu_);
        heartbeats_.push_back(m.heartbeat());
      }
      v1::ServerMessage ack;
      ack.mutable_ack()->set_server_time_ms(absl::ToUnixMillis(absl::Now()));
      stream->Write(ack);
    }
    return grpc::Status::OK;
  }

  grpc::Status FetchCheckpoint(grpc::ServerContext* context,
                               const v1::FetchCheckpointRequest* request,
                               grpc::ServerWriter<v1::CheckpointChunk>* writer) override {
    if (!Authorized(context, kCredential))
      return grpc::Status(grpc::UNAUTHENTICATED, "bad worker credential");
    if (request->sha256() != model_.sha256) return grpc::Status(grpc::NOT_FOUND, "no checkpoint");
    ++fetches_;
    std::ifstream in(model_.path, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    v1::CheckpointChunk chunk;
    chunk.set_data(data);
    chunk.set_total_bytes(static_cast<int64_t>(data.size()));
    writer->Write(chunk);
    return grpc::Status::OK;
  }

  // The latest register once `count` arrived, waiting up to `timeout`.
  std::optional<v1::RegisterRequest> WaitRegister(size_t count, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return registers_.size() >= count; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&enough), timeout)) return std::nullopt;
    return registers_.back();
  }
  bool WaitHeartbeat(std::function<bool(const v1::Heartbeat&)> pred, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !heartbeats_.empty() && pred(heartbeats_.back());
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), timeout);
  }
  int fetches() const { return fetches_.load(); }

 private:
  static bool Authorized(grpc::ServerContext* context, const char* secret) {
    auto it = context->client_metadata().find("authorization");
    return it != context->client_metadata().end() &&
           std::string(it->second.data(), it->second.size()) == std::string("Bearer ") + secret;
  }

  const testing::TorchModelFile model_;
  std::atomic<int> fetches_{0};
  absl::Mutex mu_;
  std::vector<v1::RegisterRequest> registers_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Heartbeat> heartbeats_ ABSL_GUARDED_BY(mu_);
};

class DaemonServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::WriteTorchModel("tiny", 5, dir_.File("tiny.ckpt"));
    service_ = std::make_unique<ScriptedServer>(model_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    gantry::testing::WriteSecretFile(dir_.File("join.token"), absl::StrCat(kToken, "\n"));
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  std::unique_ptr<gantry::testing::ChildProcess> StartDaemon(const std::string& serve_port) {
    return std::make_unique<gantry::testing::ChildProcess>(
        std::vector<std::string>{
            GANTRY_WORKER_BINARY, "daemon", "--server=127.0.0.1:" + std::to_string(port_),
            "--join-token-file=" + dir_.File("join.token"), "--name=gen-1",
            "--cache-dir=" + dir_.File("cache"), "--serve-port=" + serve_port, "--serve-threads=1",
            "--max-batch-size=16", "--max-queue-delay-ms=1"},
        dir_.File("daemon.log"));
  }

  grpc::Status Generate(const std::string& endpoint, const std::string& secret, int64_t count,
                        int64_t* showers) {
    auto stub = v1::WorkerGenerationService::NewStub(
        grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    ctx.AddMetadata("authorization", "Bearer " + secret);
    v1::WorkerGenerateRequest request;
    request.mutable_model()->set_checkpoint_sha256(model_.sha256);
    request.mutable_model()->set_model_ref("tiny:1");
    request.mutable_request()->mutable_range()->mutable_energy_gev()->set_min(50);
    request.mutable_request()->mutable_range()->mutable_energy_gev()->set_max(60);
    request.mutable_request()->mutable_range()->set_count(count);
    request.mutable_request()->set_seed(3);
    auto reader = stub->Generate(&ctx, request);
    v1::GenerateChunk chunk;
    *showers = 0;
    while (reader->Read(&chunk)) *showers += chunk.shape(0);
    return reader->Finish();
  }

  gantry::testing::TempDir dir_;
  testing::TorchModelFile model_;
  std::unique_ptr<ScriptedServer> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(DaemonServingTest, RegistersItsEndpointServesAndReusesTheFetchedCheckpoint) {
  auto daemon = StartDaemon("0");
  std::optional<v1::RegisterRequest> reg = service_->WaitRegister(1, absl::Seconds(30));
  ASSERT_TRUE(reg.has_value()) << daemon->Log();
  ASSERT_EQ(reg->generation_endpoint().rfind("127.0.0.1:", 0), 0u) << reg->generation_endpoint();
  ASSERT_EQ(reg->generation_secret().size(), 64u);
  // The daemon stores its worker credential after Register answers; its first heartbeat (Connect
  // checks the credential) shows it has, so the checkpoint fetch below presents it.
  ASSERT_TRUE(service_->WaitHeartbeat([](const v1::Heartbeat&) { return true; }, absl::Seconds(30)))
      << daemon->Log();
  int64_t showers = 0;
  grpc::Status s = Generate(reg->generation_endpoint(), reg->generation_secret(), 40, &showers);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << daemon->Log();
  EXPECT_EQ(showers, 40);
  EXPECT_EQ(service_->fetches(), 1);
  EXPECT_TRUE(std::filesystem::exists(dir_.File("cache/models/" + model_.sha256 + ".pt")));
  EXPECT_EQ(Generate(reg->generation_endpoint(), "wrong", 1, &showers).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(service_->WaitHeartbeat(
      [&](const v1::Heartbeat& h) {
        return h.loaded_models_size() == 1 &&
               h.loaded_models(0).checkpoint_sha256() == model_.sha256 &&
               h.loaded_models(0).memory_bytes() > 0 && h.generation_active_requests() == 0;
      },
      absl::Seconds(10)));
  EXPECT_EQ(daemon->Signal(SIGTERM, 20000), 0) << daemon->Log();

  // A restarted daemon has a new secret, and finds the checkpoint on disk.
  auto again = StartDaemon("0");
  std::optional<v1::RegisterRequest> reg2 = service_->WaitRegister(2, absl::Seconds(30));
  ASSERT_TRUE(reg2.has_value()) << again->Log();
  EXPECT_NE(reg2->generation_secret(), reg->generation_secret());
  s = Generate(reg2->generation_endpoint(), reg2->generation_secret(), 3, &showers);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(showers, 3);
  EXPECT_EQ(service_->fetches(), 1) << "the verified file in cache/models is reused";
  EXPECT_EQ(again->Signal(SIGTERM, 20000), 0);
}

TEST_F(DaemonServingTest, ServePortMinusOneTurnsServingOff) {
  auto daemon = StartDaemon("-1");
  std::optional<v1::RegisterRequest> reg = service_->WaitRegister(1, absl::Seconds(30));
  ASSERT_TRUE(reg.has_value()) << daemon->Log();
  EXPECT_EQ(reg->generation_endpoint(), "");
  EXPECT_EQ(reg->generation_secret(), "");
  EXPECT_EQ(daemon->Signal(SIGTERM, 20000), 0);
}

}  // namespace
}  // namespace gantry::serving
