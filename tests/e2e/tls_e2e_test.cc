// TLS everywhere, end to end: a private CA made at test time by deploy/local/certs.sh, a real
// gantry-server with --tls-cert/--tls-key and mutual TLS for workers (--tls-client-ca), and a real
// gantry-worker daemon with --ca-cert/--tls-cert/--tls-key whose rank trains a tiny model on an
// uploaded dataset (register, Connect, dataset download, checkpoint upload over TLS), then serves
// it from a TLS generation endpoint the server dials and verifies. Checks the refusals: plaintext
// clients, clients trusting another CA, and workers without a valid client certificate.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gantry/v1/datasets.grpc.pb.h"
#include "gantry/v1/generation.grpc.pb.h"
#include "gantry/v1/training.grpc.pb.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Channel credentials trusting the CA in `ca_file`, presenting cert/key when given.
std::shared_ptr<grpc::ChannelCredentials> Tls(const std::string& ca_file,
                                              const std::string& cert_file = "",
                                              const std::string& key_file = "") {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadText(ca_file);
  if (!cert_file.empty()) {
    ssl.pem_cert_chain = ReadText(cert_file);
    ssl.pem_private_key = ReadText(key_file);
  }
  return grpc::SslCredentials(ssl);
}

class TlsE2eTest : public ServerFixture {
 protected:
  void SetUp() override {
    pki_ = dir_.File("pki");
    rogue_ = dir_.File("rogue");
    // Our CA with the server and worker g1; another CA (same names and SANs) an attacker controls.
    Certs(pki_, "g1");
    Certs(rogue_, "g1");
    admin_token_ = "admin-secret-tls-0123456789";
    gantry::testing::WriteSecretFile(dir_.File("admin.token"), absl::StrCat(admin_token_, "\n"));
    join_token_file_ = dir_.File("join-token");
    gantry::testing::WriteSecretFile(join_token_file_, "e2e-tls-join-token-0123456789abcdef\n");
    client_credentials_ = Tls(pki_ + "/ca.pem");  // a tenant: trusts the CA, no certificate
    StartServer({"--tls-cert", pki_ + "/server.pem", "--tls-key", pki_ + "/server.key",
                 "--tls-client-ca", pki_ + "/ca.pem", "--join-token-file", join_token_file_,
                 "--heartbeat-interval-ms", "300", "--lease-timeout-ms", "8000"});
    token_ = NewTenant("physics");
  }

  void TearDown() override {
    worker_process_.reset();
    ServerFixture::TearDown();
  }

  void Certs(const std::string& dir, const std::string& workers) {
    const std::string cmd = std::string(GANTRY_SOURCE_DIR) + "/deploy/local/certs.sh " + dir + " " +
                            workers + " >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }

  // gantry-worker daemon NAME with the extra flags; one slot, one thread.
  std::unique_ptr<ChildProcess> StartDaemon(const std::string& name,
                                            const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {GANTRY_WORKER_BINARY,
                                     "daemon",
                                     "--server=" + server_->address(),
                                     "--join-token-file=" + join_token_file_,
                                     "--name=" + name,
                                     "--slots=1",
                                     "--threads=1",
                                     "--cache-dir=" + dir_.File(name),
                                     "--advertise-host=127.0.0.1",
                                     "--rendezvous-ports=29760-29780"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<ChildProcess>(argv, dir_.File(name + ".log"));
  }

  std::vector<std::string> WorkerTls(const std::string& pki, const std::string& name) const {
    return {"--ca-cert=" + pki + "/ca.pem", "--tls-cert=" + pki + "/worker-" + name + ".pem",
            "--tls-key=" + pki + "/worker-" + name + ".key"};
  }

  std::string Logs() {
    return "--- g1\n" + (worker_process_ ? worker_process_->Log() : "") + "--- server\n" +
           server_->Stderr();
  }

  // Register with the join token over `credentials`: what a daemon's first call meets.
  grpc::Status RegisterOver(std::shared_ptr<grpc::ChannelCredentials> credentials) {
    auto stub = v1::WorkerService::NewStub(grpc::CreateChannel(server_->address(), credentials));
    v1::RegisterRequest request;
    request.set_name("intruder");
    request.set_slots(1);
    request.set_threads_per_rank(1);
    request.set_advertise_host("127.0.0.1");
    v1::RegisterResponse response;
    return stub->Register(Ctx("e2e-tls-join-token-0123456789abcdef", 5000).get(), request,
                          &response);
  }

  // A ListJobs call as the tenant over `credentials`.
  grpc::Status ListJobsOver(std::shared_ptr<grpc::ChannelCredentials> credentials) {
    auto stub = v1::TrainingService::NewStub(grpc::CreateChannel(server_->address(), credentials));
    v1::ListJobsResponse jobs;
    return stub->ListJobs(Ctx(token_, 5000).get(), {}, &jobs);
  }

  // The worker's generation endpoint from its log ("serving generation on HOST:PORT (TLS)").
  std::string GenerationEndpoint() {
    std::smatch m;
    const std::string log = worker_process_->Log();
    const std::regex line("serving generation on (\\S+) \\(TLS\\)");
    return std::regex_search(log, m, line) ? m[1].str() : "";
  }

  grpc::Status WorkerGenerateOver(const std::string& endpoint,
                                  std::shared_ptr<grpc::ChannelCredentials> credentials) {
    auto stub = v1::WorkerGenerationService::NewStub(grpc::CreateChannel(endpoint, credentials));
    auto ctx = Ctx("not-the-secret", 5000);
    v1::WorkerGenerateRequest request;
    auto reader = stub->Generate(ctx.get(), request);
    v1::GenerateChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }

  std::string pki_, rogue_, join_token_file_, token_;
  std::unique_ptr<ChildProcess> worker_process_;
};

TEST_F(TlsE2eTest, TrainRegisterAndGenerateOverTlsAndRefuseWhatIsNotTrusted) {
  // The whole flow with TLS on every channel: the tenant's upload, the daemon, the rank (dataset
  // download, checkpoint upload), model registration, the worker's model fetch, and generation
  // routed over TLS to the worker.
  const std::string h5 = dir_.File("Ele_tls.h5");
  const std::string toymc = std::string(GANTRY_TOYMC_BINARY) +
                            " toymc:layout=25,events=32,seed=5,emin=20,emax=200 " + h5 +
                            " >/dev/null";
  ASSERT_EQ(std::system(toymc.c_str()), 0) << toymc;
  const std::string dataset = UploadDatasetFile(token_, "tls-data", h5);
  ASSERT_FALSE(dataset.empty());
  worker_process_ = StartDaemon("g1", WorkerTls(pki_, "g1"));
  v1::JobSpec spec;
  spec.set_display_name("tls-e2e");
  spec.set_model_name("tls-tiny");
  spec.set_model_preset("tiny");
  spec.set_dataset(dataset);
  spec.mutable_hyper_parameters()->set_epochs(1);
  spec.mutable_hyper_parameters()->set_batch_per_rank(8);
  spec.mutable_hyper_parameters()->set_seed(3);
  spec.set_world_size(1);
  v1::Job job = SubmitJob(token_, spec);
  job = WaitForJob(token_, job.id(), v1::JOB_STATE_SUCCEEDED, 240000);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
  ASSERT_EQ(job.model_ref(), "tls-tiny:1");

  v1::GenerateRequest generate;
  generate.set_model("tls-tiny:1");
  for (double e : {50.0, 100.0, 150.0}) generate.mutable_list()->add_items()->set_energy_gev(e);
  generate.set_seed(11);
  auto ctx = Ctx(token_, 120000);
  auto reader = generation_->Generate(ctx.get(), generate);
  v1::GenerateChunk chunk;
  int64_t showers = 0;
  while (reader->Read(&chunk)) showers += chunk.shape(0);
  grpc::Status generated = reader->Finish();
  ASSERT_TRUE(generated.ok()) << Describe(generated) << "\n" << Logs();
  EXPECT_EQ(showers, 3);

  // A plaintext client, and a client trusting another CA, are refused by the server.
  grpc::Status plain = ListJobsOver(grpc::InsecureChannelCredentials());
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(plain);
  grpc::Status untrusting = ListJobsOver(Tls(rogue_ + "/ca.pem"));
  EXPECT_EQ(untrusting.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(untrusting);
  // A tenant needs no client certificate.
  grpc::Status tenant = ListJobsOver(Tls(pki_ + "/ca.pem"));
  EXPECT_TRUE(tenant.ok()) << Describe(tenant);

  // Workers: the join token alone is not enough when mutual TLS is on.
  grpc::Status no_cert = RegisterOver(Tls(pki_ + "/ca.pem"));
  EXPECT_EQ(no_cert.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(no_cert);
  EXPECT_NE(no_cert.error_message().find("mutual TLS"), std::string::npos)
      << no_cert.error_message();
  grpc::Status rogue_cert =
      RegisterOver(Tls(pki_ + "/ca.pem", rogue_ + "/worker-g1.pem", rogue_ + "/worker-g1.key"));
  EXPECT_EQ(rogue_cert.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(rogue_cert);
  // ReadDataset is open to join tokens too: not without a certificate.
  {
    auto stub = v1::DatasetService::NewStub(channel_);
    auto read_ctx = Ctx("e2e-tls-join-token-0123456789abcdef", 5000);
    v1::ReadDatasetRequest read;
    read.set_dataset_id("ds-0000000000000000");
    auto datasets = stub->ReadDataset(read_ctx.get(), read);
    v1::DatasetChunk dataset_chunk;
    while (datasets->Read(&dataset_chunk)) {
    }
    grpc::Status s = datasets->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  }
  // A real daemon without a client certificate, and one with a certificate of another CA, never
  // join: the first exits with the server's refusal, the second keeps failing its handshake.
  auto certless = StartDaemon("g2", {"--ca-cert=" + pki_ + "/ca.pem", "--serve-port=-1"});
  EXPECT_EQ(certless->Wait(30000), 1) << certless->Log();
  EXPECT_NE(certless->Log().find("mutual TLS"), std::string::npos) << certless->Log();
  auto rogue =
      StartDaemon("g3", {"--ca-cert=" + pki_ + "/ca.pem", "--tls-cert=" + rogue_ + "/worker-g1.pem",
                         "--tls-key=" + rogue_ + "/worker-g1.key", "--serve-port=-1"});
  std::this_thread::sleep_for(std::chrono::seconds(2));
  v1::ListWorkersResponse workers;
  grpc::Status listed = admin_->ListWorkers(Ctx(admin_token_).get(), {}, &workers);
  ASSERT_TRUE(listed.ok()) << Describe(listed);
  ASSERT_EQ(workers.workers_size(), 1) << workers.DebugString();
  EXPECT_EQ(workers.workers(0).name(), "g1");
  rogue.reset();

  // The worker's generation endpoint serves TLS with its certificate: plaintext and clients of
  // another CA fail the handshake; a client trusting our CA gets through to the secret check.
  const std::string endpoint = GenerationEndpoint();
  ASSERT_FALSE(endpoint.empty()) << worker_process_->Log();
  grpc::Status plain_worker = WorkerGenerateOver(endpoint, grpc::InsecureChannelCredentials());
  EXPECT_EQ(plain_worker.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(plain_worker);
  grpc::Status rogue_worker = WorkerGenerateOver(endpoint, Tls(rogue_ + "/ca.pem"));
  EXPECT_EQ(rogue_worker.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(rogue_worker);
  grpc::Status trusted_worker = WorkerGenerateOver(endpoint, Tls(pki_ + "/ca.pem"));
  EXPECT_EQ(trusted_worker.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << Describe(trusted_worker);
}

}  // namespace
}  // namespace gantry::testing
