// Integration tests of gantry-server as a process: health, reflection, auth, migrations on restart,
// TLS, crash recovery and clean shutdown.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

class ServerApiTest : public ServerFixture {
 protected:
  // Asks a reflection stream for the list of services with `token`; the names it got and how the
  // call ended.
  std::pair<std::set<std::string>, grpc::Status> ListServicesByReflection(const std::string& token);
};

TEST_F(ServerApiTest, HealthIsServingForServerAndEveryServiceButGenerationWithoutWorkers) {
  EXPECT_EQ(HealthStatus(""), 1);
  for (const char* name :
       {"gantry.v1.TrainingService", "gantry.v1.CatalogService", "gantry.v1.DatasetService",
        "gantry.v1.WorkerService", "gantry.v1.AdminService"}) {
    EXPECT_EQ(HealthStatus(name), 1) << name;
  }
  // No worker serves generation yet: NOT_SERVING (2).
  EXPECT_EQ(HealthStatus("gantry.v1.GenerationService"), 2);
  // An unknown service is NOT_FOUND per the health protocol.
  EXPECT_EQ(HealthStatus("gantry.v1.NoSuchService"),
            -static_cast<int>(grpc::StatusCode::NOT_FOUND));
}

std::pair<std::set<std::string>, grpc::Status> ServerApiTest::ListServicesByReflection(
    const std::string& token) {
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(channel_);
  auto ctx = Ctx(token);
  auto stream = stub->ServerReflectionInfo(ctx.get());
  grpc::reflection::v1alpha::ServerReflectionRequest request;
  request.set_list_services("*");
  std::set<std::string> names;
  if (stream->Write(request)) {
    grpc::reflection::v1alpha::ServerReflectionResponse response;
    if (stream->Read(&response)) {
      for (const auto& s : response.list_services_response().service()) names.insert(s.name());
    }
  }
  stream->WritesDone();
  return {names, stream->Finish()};
}

TEST_F(ServerApiTest, ReflectionIsOffByDefault) {
  const auto [names, status] = ListServicesByReflection(admin_token_);
  EXPECT_TRUE(names.empty());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << Describe(status);
}

TEST_F(ServerApiTest, ReflectionWithTheFlagServesAuthenticatedCallersOnly) {
  ASSERT_EQ(StopServer(), 0);
  StartServer({"--reflection"});
  // Without a token, or with a wrong one: nothing listed, UNAUTHENTICATED.
  for (const std::string& token : {std::string(), std::string("not-a-token")}) {
    const auto [names, status] = ListServicesByReflection(token);
    EXPECT_TRUE(names.empty()) << token;
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(status);
  }
  // Health stays open to everyone (load balancers carry no token).
  EXPECT_EQ(HealthStatus(""), 1);

  // A tenant's token: every service, and a service's descriptor (what grpcurl needs).
  const std::string tenant = NewTenant("reflector");
  const auto [names, status] = ListServicesByReflection(tenant);
  EXPECT_TRUE(status.ok()) << Describe(status);
  for (const char* name :
       {"gantry.v1.TrainingService", "gantry.v1.GenerationService", "gantry.v1.CatalogService",
        "gantry.v1.DatasetService", "gantry.v1.WorkerService", "gantry.v1.AdminService",
        "grpc.health.v1.Health"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(channel_);
  auto ctx = Ctx(admin_token_);
  auto stream = stub->ServerReflectionInfo(ctx.get());
  grpc::reflection::v1alpha::ServerReflectionRequest request;
  request.set_file_containing_symbol("gantry.v1.TrainingService");
  ASSERT_TRUE(stream->Write(request));
  grpc::reflection::v1alpha::ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_GT(response.file_descriptor_response().file_descriptor_proto_size(), 0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServerApiTest, MissingWrongAndMalformedTokensAreUnauthenticated) {
  v1::ListJobsRequest request;
  v1::ListJobsResponse response;
  grpc::Status s = training_->ListJobs(Ctx("").get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  EXPECT_NE(s.error_message().find("authorization"), std::string::npos) << s.error_message();

  s = training_->ListJobs(Ctx("gnt_not-a-real-token").get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);

  auto ctx = Ctx("");
  ctx->AddMetadata("authorization", "Basic dXNlcjpwYXNz");
  s = training_->ListJobs(ctx.get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  EXPECT_NE(s.error_message().find("Bearer"), std::string::npos) << s.error_message();

  // The admin token works everywhere public.
  s = training_->ListJobs(Ctx(admin_token_).get(), request, &response);
  EXPECT_TRUE(s.ok()) << Describe(s);
}

TEST_F(ServerApiTest, RevokedTokenIsUnauthenticated) {
  NewTenant("alice");
  v1::CreateTokenRequest create;
  create.set_tenant("alice");
  v1::CreateTokenResponse token;
  ASSERT_TRUE(admin_->CreateToken(Ctx(admin_token_).get(), create, &token).ok());
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(training_->ListJobs(Ctx(token.token()).get(), {}, &jobs).ok());
  v1::RevokeTokenRequest revoke;
  revoke.set_token_id(token.token_id());
  v1::RevokeTokenResponse revoked;
  grpc::Status s = admin_->RevokeToken(Ctx(admin_token_).get(), revoke, &revoked);
  ASSERT_TRUE(s.ok()) << Describe(s);
  s = training_->ListJobs(Ctx(token.token()).get(), {}, &jobs);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  EXPECT_NE(s.error_message().find("revoked"), std::string::npos) << s.error_message();
}

TEST_F(ServerApiTest, AdminServiceNeedsAnAdminAndWorkerServiceAJoinToken) {
  const std::string alice = NewTenant("alice");
  v1::ListTenantsResponse tenants;
  grpc::Status s = admin_->ListTenants(Ctx(alice).get(), {}, &tenants);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  EXPECT_NE(s.error_message().find("alice"), std::string::npos) << s.error_message();
  s = admin_->ListTenants(Ctx("").get(), {}, &tenants);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  s = admin_->ListTenants(Ctx(admin_token_).get(), {}, &tenants);
  ASSERT_TRUE(s.ok()) << Describe(s);
  std::set<std::string> names;
  for (const auto& t : tenants.tenants()) names.insert(t.name());
  EXPECT_EQ(names, (std::set<std::string>{"admin", "alice"}));

  // A second admin tenant may administer too.
  const std::string root2 = NewTenant("ops", /*admin=*/true);
  EXPECT_TRUE(admin_->ListTenants(Ctx(root2).get(), {}, &tenants).ok());

  v1::RegisterRequest reg;
  reg.set_name("w1");
  reg.set_slots(2);
  reg.set_advertise_host("127.0.0.1");
  v1::RegisterResponse registered;
  s = worker_->Register(Ctx(alice).get(), reg, &registered);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  s = worker_->Register(Ctx(admin_token_).get(), reg, &registered);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);

  v1::CreateJoinTokenRequest join_request;
  v1::CreateTokenResponse join;
  ASSERT_TRUE(admin_->CreateJoinToken(Ctx(admin_token_).get(), join_request, &join).ok());
  s = worker_->Register(Ctx(join.token()).get(), reg, &registered);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_FALSE(registered.worker_id().empty());
  // A join token is not a tenant token.
  v1::ListJobsResponse jobs;
  s = training_->ListJobs(Ctx(join.token()).get(), {}, &jobs);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
}

TEST_F(ServerApiTest, TenantsCannotSeeOrCancelEachOthersJobs) {
  const std::string alice = NewTenant("alice");
  const std::string bob = NewTenant("bob");
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = GoodSpec();
  v1::Job job;
  ASSERT_TRUE(training_->SubmitJob(Ctx(alice).get(), submit, &job).ok());
  EXPECT_EQ(job.owner(), "alice");

  v1::GetJobRequest get;
  get.set_job_id(job.id());
  v1::Job got;
  grpc::Status s = training_->GetJob(Ctx(bob).get(), get, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job.id());
  s = training_->CancelJob(Ctx(bob).get(), cancel, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  v1::WatchJobRequest watch;
  watch.set_job_id(job.id());
  auto ctx = Ctx(bob);
  auto reader = training_->WatchJob(ctx.get(), watch);
  v1::JobEvent event;
  EXPECT_FALSE(reader->Read(&event));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);

  v1::ListJobsRequest list;
  list.set_owner("alice");  // ignored for non-admins
  v1::ListJobsResponse listed;
  ASSERT_TRUE(training_->ListJobs(Ctx(bob).get(), list, &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 0);
  // Alice still has it; an admin sees it when asking for alice's jobs.
  ASSERT_TRUE(training_->GetJob(Ctx(alice).get(), get, &got).ok());
  EXPECT_EQ(got.state(), v1::JOB_STATE_QUEUED);
  ASSERT_TRUE(training_->ListJobs(Ctx(admin_token_).get(), list, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).id(), job.id());
}

TEST_F(ServerApiTest, SecondStartAppliesNoMigrationsAndTooNewDatabaseIsRefused) {
  EXPECT_NE(server_->Stderr().find("migration(s) applied"), std::string::npos);
  EXPECT_EQ(server_->Stderr().find(" 0 migration(s) applied"), std::string::npos)
      << server_->Stderr();
  const std::string versions = db_.Query("SELECT count(*) FROM schema_version");
  ASSERT_EQ(StopServer(), 0);
  std::remove(dir_.File("server.stderr").c_str());
  StartServer();
  EXPECT_NE(server_->Stderr().find(" 0 migration(s) applied"), std::string::npos)
      << server_->Stderr();
  EXPECT_EQ(db_.Query("SELECT count(*) FROM schema_version"), versions);
  EXPECT_EQ(HealthStatus(), 1);

  db_.Query("INSERT INTO schema_version(version, description) VALUES (9999, 'from the future')");
  std::string output;
  const int code = ServerProcess::RunToExit(StandardArgs(), &output);
  EXPECT_NE(code, 0);
  EXPECT_NE(output.find("newer than this gantry-server"), std::string::npos) << output;
}

TEST_F(ServerApiTest, RefusesToStartWithoutItsAdminTokenFileOrDatabase) {
  std::vector<std::string> args = StandardArgs();
  args[2] = "--admin-token-file=" + dir_.File("missing.token");
  std::string output;
  EXPECT_EQ(ServerProcess::RunToExit(args, &output), 1);
  EXPECT_NE(output.find("--admin-token-file"), std::string::npos) << output;

  args = StandardArgs();
  args[0] = "--db=host=/nonexistent-socket-dir port=5432 dbname=x user=postgres";
  EXPECT_EQ(ServerProcess::RunToExit(args, &output), 1);
  EXPECT_NE(output.find("cannot start"), std::string::npos) << output;
}

TEST_F(ServerApiTest, TlsWithASelfSignedCertificate) {
  const std::string cert = dir_.File("cert.pem"), key = dir_.File("key.pem");
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<std::string> args = StandardArgs();
  args[1] = "--data-dir=" + dir_.File("data-tls");
  args.push_back("--tls-cert=" + cert);
  args.push_back("--tls-key=" + key);
  std::string error;
  auto tls_server = ServerProcess::Start(args, dir_.File("tls.stderr"), &error);
  ASSERT_NE(tls_server, nullptr) << error;

  std::ifstream in(cert);
  std::stringstream pem;
  pem << in.rdbuf();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem.str();
  auto channel = grpc::CreateChannel(tls_server->address(), grpc::SslCredentials(ssl));
  auto training = v1::TrainingService::NewStub(channel);
  v1::ListJobsResponse jobs;
  grpc::Status s = training->ListJobs(Ctx(admin_token_).get(), {}, &jobs);
  EXPECT_TRUE(s.ok()) << Describe(s);
  s = training->ListJobs(Ctx("").get(), {}, &jobs);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);

  // A plaintext client cannot talk to the TLS port.
  auto plain = v1::TrainingService::NewStub(
      grpc::CreateChannel(tls_server->address(), grpc::InsecureChannelCredentials()));
  s = plain->ListJobs(Ctx(admin_token_, 3000).get(), {}, &jobs);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(s);
  training.reset();
  plain.reset();
  channel.reset();
  EXPECT_EQ(tls_server->Terminate(), 0) << tls_server->Stderr();
}

TEST_F(ServerApiTest, AWorkerTlsNameNeedsMutualTlsAndADnsName) {
  const std::string cert = dir_.File("cert.pem"), key = dir_.File("key.pem");
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=DNS:localhost -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<std::string> args = StandardArgs();
  args.push_back("--worker-tls-name=gantry-worker");
  std::string output;
  EXPECT_EQ(ServerProcess::RunToExit(args, &output), 1) << output;
  EXPECT_NE(output.find("--worker-tls-name needs --tls-client-ca"), std::string::npos) << output;
  args = StandardArgs();
  for (const std::string& flag :
       {"--tls-cert=" + cert, "--tls-key=" + key, "--tls-client-ca=" + cert,
        std::string("--worker-tls-name=a b")}) {
    args.push_back(flag);
  }
  EXPECT_EQ(ServerProcess::RunToExit(args, &output), 1) << output;
  EXPECT_NE(output.find("--worker-tls-name: give a DNS name"), std::string::npos) << output;
}

TEST_F(ServerApiTest, KilledServerRestartsWithEveryJob) {
  const std::string alice = NewTenant("alice");
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    v1::SubmitJobRequest submit;
    *submit.mutable_spec() = GoodSpec();
    v1::Job job;
    ASSERT_TRUE(training_->SubmitJob(Ctx(alice).get(), submit, &job).ok());
    ids.push_back(job.id());
  }
  v1::CancelJobRequest cancel;
  cancel.set_job_id(ids[1]);
  v1::Job cancelled;
  ASSERT_TRUE(training_->CancelJob(Ctx(alice).get(), cancel, &cancelled).ok());

  server_->Kill();
  StartServer();
  v1::ListJobsResponse listed;
  ASSERT_TRUE(training_->ListJobs(Ctx(alice).get(), {}, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 3);
  std::map<std::string, v1::JobState> states;
  for (const v1::Job& job : listed.jobs()) states[job.id()] = job.state();
  EXPECT_EQ(states[ids[0]], v1::JOB_STATE_QUEUED);
  EXPECT_EQ(states[ids[1]], v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(states[ids[2]], v1::JOB_STATE_QUEUED);
}

TEST_F(ServerApiTest, DatabaseOutageIsUnavailableAndTheServerRecovers) {
  const std::string alice = NewTenant("alice");
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = GoodSpec();
  v1::Job job;
  ASSERT_TRUE(training_->SubmitJob(Ctx(alice).get(), submit, &job).ok());

  db_.AdminQuery("ALTER DATABASE " + db_.name() + " ALLOW_CONNECTIONS false");
  db_.AdminQuery("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" +
                 db_.name() + "'");
  v1::ListJobsResponse listed;
  grpc::Status s = training_->ListJobs(Ctx(alice).get(), {}, &listed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(s);
  // The process stays up and answers health checks (NOT_SERVING once the monitor saw the outage).
  EXPECT_GT(HealthStatus(), 0) << "the process stays up";

  db_.AdminQuery("ALTER DATABASE " + db_.name() + " ALLOW_CONNECTIONS true");
  s = training_->ListJobs(Ctx(alice).get(), {}, &listed);
  ASSERT_TRUE(s.ok()) << Describe(s);
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).id(), job.id());
}

TEST_F(ServerApiTest, BootstrapJoinTokenFileLetsWorkersRegister) {
  const std::string join = "gjt_bootstrap_join_token_0123456789";
  gantry::testing::WriteSecretFile(dir_.File("join.token"), absl::StrCat(join, "\n"));
  ASSERT_EQ(StopServer(), 0);
  StartServer({"--join-token-file=" + dir_.File("join.token")});
  v1::RegisterRequest reg;
  reg.set_name("w-boot");
  reg.set_slots(1);
  reg.set_advertise_host("127.0.0.1");
  v1::RegisterResponse registered;
  grpc::Status s = worker_->Register(Ctx(join).get(), reg, &registered);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(registered.worker_id().rfind("wrk-", 0), 0u) << registered.worker_id();
  // The admin token survives restarts (imported once, idempotently).
  v1::ListTenantsResponse tenants;
  EXPECT_TRUE(admin_->ListTenants(Ctx(admin_token_).get(), {}, &tenants).ok());
}

// The data directory holds every blob and the rank credential key: 0700, with what the server
// creates in it private too; one that others may enter is tightened at start, and the log says so.
TEST_F(ServerApiTest, DataDirectoryIsPrivateAndTightenedAtStart) {
  const auto mode = [](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  };
  const std::string data = dir_.File("data");
  EXPECT_EQ(mode(data), 0700u);
  EXPECT_EQ(mode(data + "/blobs"), 0700u);
  EXPECT_EQ(mode(RankKeyFile()), 0600u);

  ASSERT_EQ(StopServer(), 0);
  ASSERT_EQ(::chmod(data.c_str(), 0755), 0);
  StartServer();
  EXPECT_EQ(mode(data), 0700u);
  std::ifstream in(dir_.File("server.stderr"));
  std::stringstream log;
  log << in.rdbuf();
  EXPECT_NE(log.str().find("--data-dir: tightened " + data + " from 0755 to 0700"),
            std::string::npos)
      << log.str();
}

TEST_F(ServerApiTest, OversizeMessagesAreRefusedByTheTransport) {
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = GoodSpec();
  submit.mutable_spec()->set_display_name(std::string(17 << 20, 'x'));
  v1::Job job;
  grpc::Status s = training_->SubmitJob(Ctx(admin_token_, 30000).get(), submit, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
  EXPECT_EQ(HealthStatus(), 1);
}

}  // namespace
}  // namespace gantry::testing
