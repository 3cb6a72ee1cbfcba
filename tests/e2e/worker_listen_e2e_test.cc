// The worker protocol on its own listener: gantry-server with --worker-listen serves tenants on
// --listen and workers on the worker port only. A real gantry-worker daemon pointed at the worker
// port registers, downloads an uploaded dataset (ReadDataset) and trains a job whose model is
// registered; WorkerService on the tenant port and the tenant services on the worker port answer
// UNIMPLEMENTED; a credential at the wrong listener is PERMISSION_DENIED; health and the RPC
// metrics cover both listeners; both close on SIGTERM; the worker listener has the main one's TLS;
// bad --worker-listen values stop the start. Ports 45010-45013 (servers), 45100-45120 (rendezvous).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "httplib.h"
#include "tests/e2e/worker_pool_fixture.h"
#include "tests/support/build_paths.h"

namespace gantry::testing {
namespace {

constexpr char kWorkerListen[] = "127.0.0.1:45010";
constexpr int kMetricsPort = 45011;
constexpr int kRendezvousBase = 45100;
constexpr char kJoinToken[] = "e2e-join-token-0123456789abcdef";  // WorkerPoolFixture's

class WorkerListenE2eTest : public WorkerPoolFixture {
 protected:
  void SetUp() override {
    server_extra_args_ = {std::string("--worker-listen=") + kWorkerListen,
                          "--metrics-listen=127.0.0.1:" + std::to_string(kMetricsPort)};
    worker_server_address_ = kWorkerListen;
    WorkerPoolFixture::SetUp();
    worker_channel_ = grpc::CreateChannel(kWorkerListen, grpc::InsecureChannelCredentials());
  }

  void TearDown() override {
    worker_channel_.reset();
    WorkerPoolFixture::TearDown();
  }

  // grpc.health.v1 Check of `service` on `channel`: the status (SERVING is 1) or -code.
  static int HealthOn(const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status s =
        grpc::health::v1::Health::NewStub(channel)->Check(Ctx("").get(), request, &response);
    return s.ok() ? response.status() : -static_cast<int>(s.error_code());
  }

  // Registers a worker through `channel` with the join token.
  static grpc::Status Register(const std::shared_ptr<grpc::Channel>& channel,
                               const std::string& name, v1::RegisterResponse* response) {
    v1::RegisterRequest request;
    request.set_name(name);
    request.set_slots(1);
    request.set_threads_per_rank(1);
    request.set_advertise_host("127.0.0.1");
    return v1::WorkerService::NewStub(channel)->Register(Ctx(kJoinToken).get(), request, response);
  }

  // ReadDataset of `id` through `channel` as `token`; *bytes counts what arrived.
  static grpc::Status ReadDataset(const std::shared_ptr<grpc::Channel>& channel,
                                  const std::string& token, const std::string& id, int64_t* bytes) {
    v1::ReadDatasetRequest request;
    request.set_dataset_id(id);
    auto ctx = Ctx(token, 30000);
    auto reader = v1::DatasetService::NewStub(channel)->ReadDataset(ctx.get(), request);
    v1::DatasetChunk chunk;
    *bytes = 0;
    while (reader->Read(&chunk)) *bytes += static_cast<int64_t>(chunk.data().size());
    return reader->Finish();
  }

  std::string Metrics() {
    httplib::Client client("127.0.0.1", kMetricsPort);
    httplib::Result result = client.Get("/metrics");
    if (!result || result->status != 200) {
      ADD_FAILURE() << "GET /metrics: " << (result ? std::to_string(result->status) : "no answer");
      return "";
    }
    return result->body;
  }

  std::shared_ptr<grpc::Channel> worker_channel_;
};

TEST_F(WorkerListenE2eTest, WorkersJoinAndTrainOnlyThroughTheWorkerListener) {
  // Health: each listener answers for what it carries.
  EXPECT_EQ(HealthStatus(""), 1);
  EXPECT_EQ(HealthStatus("gantry.v1.TrainingService"), 1);
  EXPECT_EQ(HealthStatus("gantry.v1.WorkerService"), -grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(HealthOn(worker_channel_, ""), 1);
  EXPECT_EQ(HealthOn(worker_channel_, "gantry.v1.WorkerService"), 1);
  EXPECT_EQ(HealthOn(worker_channel_, "gantry.v1.DatasetService"), 1);
  EXPECT_EQ(HealthOn(worker_channel_, "gantry.v1.TrainingService"), -grpc::StatusCode::NOT_FOUND);

  // The worker protocol is not served on the tenant port.
  v1::RegisterResponse registered;
  grpc::Status s = Register(channel_, "on-tenant-port", &registered);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << Describe(s);
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kJoinToken);
    auto stream = worker_->Connect(&ctx);
    stream->WritesDone();
    s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << Describe(s);
  }

  // The tenant services are not served on the worker port, whatever the token.
  {
    v1::ListJobsResponse jobs;
    s = v1::TrainingService::NewStub(worker_channel_)->ListJobs(Ctx(token_).get(), {}, &jobs);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << Describe(s);
    v1::ListWorkersResponse workers;
    s = v1::AdminService::NewStub(worker_channel_)
            ->ListWorkers(Ctx(admin_token_).get(), {}, &workers);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << Describe(s);
    v1::ListModelsResponse models;
    s = v1::CatalogService::NewStub(worker_channel_)->ListModels(Ctx(token_).get(), {}, &models);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << Describe(s);
    v1::ListDatasetsResponse datasets;
    s = v1::DatasetService::NewStub(worker_channel_)
            ->ListDatasets(Ctx(token_).get(), {}, &datasets);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << Describe(s);
  }

  // The tenant uploads on the tenant port; ReadDataset is on both ports, each for its own kind.
  const std::string h5 = dir_.File("Ele_wl.h5");
  const std::string toymc = std::string(GANTRY_TOYMC_BINARY) +
                            " toymc:layout=25,events=40,seed=5,emin=20,emax=200 " + h5 +
                            " >/dev/null";
  ASSERT_EQ(std::system(toymc.c_str()), 0) << toymc;
  const std::string dataset = UploadDatasetFile(token_, "wl-data", h5);
  ASSERT_FALSE(dataset.empty());
  s = Register(worker_channel_, "wl-reader", &registered);
  ASSERT_TRUE(s.ok()) << Describe(s);
  int64_t bytes = 0;
  s = ReadDataset(channel_, token_, dataset, &bytes);
  EXPECT_TRUE(s.ok()) << Describe(s);
  EXPECT_GT(bytes, 0);
  s = ReadDataset(worker_channel_, registered.worker_credential(), dataset, &bytes);
  EXPECT_TRUE(s.ok()) << Describe(s);
  EXPECT_GT(bytes, 0);
  s = ReadDataset(channel_, registered.worker_credential(), dataset, &bytes);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  EXPECT_NE(s.error_message().find("--worker-listen"), std::string::npos) << Describe(s);
  EXPECT_EQ(bytes, 0);
  s = ReadDataset(worker_channel_, token_, dataset, &bytes);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  EXPECT_NE(s.error_message().find("tenant tokens are not accepted"), std::string::npos)
      << Describe(s);
  EXPECT_EQ(bytes, 0);

  // A real daemon given the worker port joins, downloads the dataset and trains; the model is
  // registered (the rank's checkpoint upload and validation report cross the worker port too).
  StartWorker("wl1", kRendezvousBase);
  WaitForFreeWorkers(1);
  v1::JobSpec spec = Spec(0);
  spec.set_display_name("worker-listen");
  spec.set_model_name("wl-tiny");
  spec.set_dataset(dataset);
  spec.set_world_size(1);
  spec.mutable_hyper_parameters()->set_epochs(1);
  spec.mutable_hyper_parameters()->set_batch_per_rank(8);
  spec.mutable_validation()->set_showers_per_bin(10);
  v1::Job job = Submit(spec);
  job = WaitForState(job.id(), v1::JOB_STATE_SUCCEEDED, 120);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
  EXPECT_EQ(job.model_ref(), "wl-tiny:1");

  // The RPC metrics count calls of both listeners, the refusals included.
  const std::string metrics = Metrics();
  for (const std::string& series :
       {"gantry_rpc_requests_total{method=\"/gantry.v1.WorkerService/Register\",code=\"OK\"}",
        "gantry_rpc_requests_total{method=\"/gantry.v1.WorkerService/UploadCheckpoint\","
        "code=\"OK\"}",
        "gantry_rpc_requests_total{method=\"/gantry.v1.DatasetService/ReadDataset\","
        "code=\"PERMISSION_DENIED\"} 2",
        "gantry_rpc_requests_total{method=\"/gantry.v1.TrainingService/SubmitJob\","
        "code=\"OK\"} 1"}) {
    EXPECT_NE(metrics.find(series), std::string::npos) << series << "\n" << metrics;
  }

  // SIGTERM closes both listeners and the server exits cleanly.
  workers_.clear();
  worker_channel_.reset();
  ASSERT_EQ(StopServer(), 0);
  auto closed = grpc::CreateChannel(kWorkerListen, grpc::InsecureChannelCredentials());
  EXPECT_EQ(HealthOn(closed, ""), -grpc::StatusCode::UNAVAILABLE);
}

// The worker listener has the main listener's TLS, mutual TLS for workers included: a second server
// (ports 45012-45013) with --tls-cert/--tls-key/--tls-client-ca and a private CA from
// deploy/local/certs.sh.
TEST_F(WorkerListenE2eTest, WorkerListenerHasTheMainListenersTls) {
  const std::string pki = dir_.File("pki");
  const std::string certs =
      std::string(GANTRY_SOURCE_DIR) + "/deploy/local/certs.sh " + pki + " w1 >/dev/null";
  ASSERT_EQ(std::system(certs.c_str()), 0) << certs;
  const auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  const auto tls = [&](bool client_certificate) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = read(pki + "/ca.pem");
    if (client_certificate) {
      ssl.pem_cert_chain = read(pki + "/worker-w1.pem");
      ssl.pem_private_key = read(pki + "/worker-w1.key");
    }
    return grpc::SslCredentials(ssl);
  };
  std::string error;
  auto tls_server = ServerProcess::Start(
      {"--db=" + db_.dsn(), "--data-dir=" + dir_.File("data-tls"),
       "--admin-token-file=" + dir_.File("admin.token"), "--join-token-file=" + join_token_file_,
       "--listen=127.0.0.1:45012", "--worker-listen=127.0.0.1:45013",
       "--tls-cert=" + pki + "/server.pem", "--tls-key=" + pki + "/server.key",
       "--tls-client-ca=" + pki + "/ca.pem"},
      dir_.File("tls-server.stderr"), &error);
  ASSERT_NE(tls_server, nullptr) << error;
  const std::string worker_port = "127.0.0.1:45013";
  // Plaintext is refused on the worker port as on the tenant port.
  EXPECT_EQ(HealthOn(grpc::CreateChannel(worker_port, grpc::InsecureChannelCredentials()), ""),
            -grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(HealthOn(grpc::CreateChannel("127.0.0.1:45012", tls(false)), ""), 1);
  EXPECT_EQ(HealthOn(grpc::CreateChannel(worker_port, tls(false)), "gantry.v1.WorkerService"), 1);
  // Mutual TLS for workers: no client certificate, no registration; with one, registered.
  v1::RegisterResponse registered;
  grpc::Status s = Register(grpc::CreateChannel(worker_port, tls(false)), "w1", &registered);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  EXPECT_NE(s.error_message().find("mutual TLS"), std::string::npos) << Describe(s);
  s = Register(grpc::CreateChannel(worker_port, tls(true)), "w1", &registered);
  EXPECT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(tls_server->Terminate(), 0) << tls_server->Stderr();
}

TEST_F(WorkerListenE2eTest, BadWorkerListenValuesStopTheStartWithAClearError) {
  struct Case {
    std::string value;
    int exit_code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no-port", 2, "--worker-listen"},
      {"127.0.0.1:70000", 2, "--worker-listen"},
      // The running server holds both ports.
      {kWorkerListen, 1, "--worker-listen: cannot listen on 127.0.0.1:45010"},
      {server_->address(), 1, "is --listen's address"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = StandardArgs();
    args.push_back("--worker-listen=" + c.value);
    args.push_back("--listen=" + (c.message == "is --listen's address" ? c.value : "127.0.0.1:0"));
    std::string output;
    EXPECT_EQ(ServerProcess::RunToExit(args, &output), c.exit_code) << c.value << "\n" << output;
    EXPECT_NE(output.find(c.message), std::string::npos) << c.value << "\n" << output;
  }
}

}  // namespace
}  // namespace gantry::testing
