#include "absl/strings/str_cat.h"
#include "tests/server/server_fixture.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "base/sha256.h"
#include "tests/support/files.h"

namespace gantry::testing {

namespace v1 = ::gantry::v1;

std::string Describe(const grpc::Status& status) {
  return std::to_string(static_cast<int>(status.error_code())) + ": " + status.error_message();
}

void ServerFixture::SetUp() {
  std::random_device rd;
  admin_token_ = "admin-secret-" + std::to_string(rd()) + std::to_string(rd());
  gantry::testing::WriteSecretFile(dir_.File("admin.token"), absl::StrCat(admin_token_, "\n"));
  StartServer(SetUpServerArgs());
}

void ServerFixture::TearDown() {
  if (server_ != nullptr) {
    const int code = StopServer();
    EXPECT_EQ(code, 0) << "gantry-server did not exit cleanly on SIGTERM";
  }
}

int ServerFixture::StopServer() {
  // Idle client connections would hold the server's graceful shutdown until its grace period ends.
  training_.reset();
  generation_.reset();
  catalog_.reset();
  datasets_.reset();
  worker_.reset();
  admin_.reset();
  studies_.reset();
  health_.reset();
  channel_.reset();
  const int code = server_->Terminate();
  if (code != 0) ADD_FAILURE() << "exit code " << code << "; stderr:\n" << server_->Stderr();
  server_.reset();
  return code;
}

std::vector<std::string> ServerFixture::StandardArgs() const {
  return {"--db=" + (server_dsn_.empty() ? db_.dsn() : server_dsn_),
          "--data-dir=" + dir_.File("data"), "--admin-token-file=" + dir_.File("admin.token")};
}

std::string ServerFixture::RankKey() const {
  std::ifstream in(RankKeyFile());
  std::string key;
  in >> key;
  return key;
}

std::string ServerFixture::IssueRankCredential(const std::string& job_id, int attempt,
                                               const std::string& worker_id) {
  db_.Query(
      "INSERT INTO workers (id, name, registration, slots, free_slots, credential_sha256) "
      "VALUES ('" +
      worker_id + "', '" + worker_id + "', ''::bytea, 1, 1, '" + Sha256Hex(worker_id) +
      "') ON CONFLICT (id) DO NOTHING");
  const std::string message =
      "gantry rank credential\n" + job_id + "\n" + std::to_string(attempt) + "\n" + worker_id;
  return "grk_" + job_id + ":" + std::to_string(attempt) + ":" + worker_id + ":" +
         HmacSha256Hex(RankKey(), message);
}

std::vector<std::string> ServerFixture::WorkerProtocolArgs(const std::string& join) const {
  const std::string join_file = dir_.File("join");
  gantry::testing::WriteSecretFile(join_file, absl::StrCat(join, "\n"));
  return {"--join-token-file",  join_file, "--heartbeat-interval-ms", "200",
          "--lease-timeout-ms", "1500"};
}

void ServerFixture::StartServer(const std::vector<std::string>& extra) {
  std::vector<std::string> args = StandardArgs();
  args.insert(args.end(), extra.begin(), extra.end());
  std::string error;
  server_ = ServerProcess::Start(args, dir_.File("server.stderr"), &error);
  ASSERT_NE(server_, nullptr) << error;
  channel_ = grpc::CreateChannel(server_->address(), client_credentials_ != nullptr
                                                         ? client_credentials_
                                                         : grpc::InsecureChannelCredentials());
  training_ = v1::TrainingService::NewStub(channel_);
  generation_ = v1::GenerationService::NewStub(channel_);
  catalog_ = v1::CatalogService::NewStub(channel_);
  datasets_ = v1::DatasetService::NewStub(channel_);
  worker_ = v1::WorkerService::NewStub(channel_);
  admin_ = v1::AdminService::NewStub(channel_);
  studies_ = v1::StudyService::NewStub(channel_);
  health_ = grpc::health::v1::Health::NewStub(channel_);
}

std::unique_ptr<grpc::ClientContext> ServerFixture::Ctx(const std::string& token, int deadline_ms) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  return ctx;
}

std::string ServerFixture::NewTenant(const std::string& name, bool admin) {
  v1::CreateTenantRequest create;
  create.set_name(name);
  create.set_admin(admin);
  v1::Tenant tenant;
  grpc::Status s = admin_->CreateTenant(Ctx(admin_token_).get(), create, &tenant);
  EXPECT_TRUE(s.ok()) << Describe(s);
  v1::CreateTokenRequest token_request;
  token_request.set_tenant(name);
  token_request.set_description("test");
  v1::CreateTokenResponse token;
  s = admin_->CreateToken(Ctx(admin_token_).get(), token_request, &token);
  EXPECT_TRUE(s.ok()) << Describe(s);
  EXPECT_FALSE(token.token().empty());
  return token.token();
}

v1::Job ServerFixture::SubmitJob(const std::string& token, const v1::JobSpec& spec) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  v1::Job job;
  grpc::Status s = training_->SubmitJob(Ctx(token).get(), request, &job);
  EXPECT_TRUE(s.ok()) << Describe(s);
  return job;
}

v1::Job ServerFixture::GetJob(const std::string& token, const std::string& id) {
  v1::GetJobRequest request;
  request.set_job_id(id);
  v1::Job job;
  grpc::Status s = training_->GetJob(Ctx(token).get(), request, &job);
  EXPECT_TRUE(s.ok()) << Describe(s);
  return job;
}

v1::Job ServerFixture::WaitForJob(const std::string& token, const std::string& id,
                                  v1::JobState state, int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  v1::Job job = GetJob(token, id);
  while (job.state() != state && job.state() != v1::JOB_STATE_SUCCEEDED &&
         job.state() != v1::JOB_STATE_FAILED && job.state() != v1::JOB_STATE_CANCELLED &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    job = GetJob(token, id);
  }
  return job;
}

std::string ServerFixture::UploadDatasetFile(const std::string& token, const std::string& name,
                                             const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  if (!in || bytes.empty()) {
    ADD_FAILURE() << "cannot read the dataset file " << path;
    return "";
  }
  v1::Dataset dataset;
  auto ctx = Ctx(token, 30000);
  auto writer = datasets_->UploadDataset(ctx.get(), &dataset);
  v1::UploadDatasetRequest header;
  header.mutable_header()->set_name(name);
  header.mutable_header()->set_size_bytes(bytes.size());
  header.mutable_header()->set_sha256(Sha256Hex(bytes));
  header.mutable_header()->set_file_name(std::filesystem::path(path).filename().string());
  v1::UploadDatasetRequest chunk;
  chunk.set_chunk(bytes);
  const bool written = writer->Write(header) && writer->Write(chunk);
  writer->WritesDone();
  const grpc::Status uploaded = writer->Finish();
  if (!written || !uploaded.ok()) {
    ADD_FAILURE() << "upload of " << path << " as " << name << ": " << Describe(uploaded);
    return "";
  }
  return dataset.id();
}

v1::JobSpec ServerFixture::GoodSpec() {
  v1::JobSpec spec;
  spec.set_display_name("test job");
  (*spec.mutable_labels())["team"] = "calo";
  spec.set_model_preset("tiny");
  spec.set_dataset("toymc:layout=25,events=64,seed=3,emin=10,emax=100");
  spec.mutable_hyper_parameters()->set_epochs(2);
  spec.mutable_hyper_parameters()->set_batch_per_rank(8);
  spec.mutable_hyper_parameters()->set_learning_rate(1e-3);
  spec.set_world_size(2);
  spec.set_priority(5);
  return spec;
}

int ServerFixture::HealthStatus(const std::string& service) {
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = health_->Check(Ctx("").get(), request, &response);
  if (!s.ok()) return -static_cast<int>(s.error_code());
  return response.status();
}

}  // namespace gantry::testing
