// ServerFixture: a gtest fixture that starts a real gantry-server process on a fresh PostgreSQL
// database (TestDatabase) and a temp data dir, with an admin token, and gives typed gRPC stubs.
#ifndef GANTRY_TESTS_SERVER_SERVER_FIXTURE_H_
#define GANTRY_TESTS_SERVER_SERVER_FIXTURE_H_

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gantry/v1/admin.grpc.pb.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "gantry/v1/datasets.grpc.pb.h"
#include "gantry/v1/generation.grpc.pb.h"
#include "gantry/v1/studies.grpc.pb.h"
#include "gantry/v1/training.grpc.pb.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/server/server_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_database.h"

namespace gantry::testing {

class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // (Re)starts the server with the standard flags plus `extra` and connects the stubs.
  void StartServer(const std::vector<std::string>& extra = {});
  // The flags SetUp adds to the standard ones when it starts the server (none by default).
  virtual std::vector<std::string> SetUpServerArgs() const { return {}; }
  // Closes the stubs, sends SIGTERM and returns the exit code (0 = clean shutdown).
  int StopServer();
  // The standard flags: --db, --data-dir, --admin-token-file.
  std::vector<std::string> StandardArgs() const;
  // The file of the server's rank-credential key (its default --rank-key-file, in --data-dir)
  // and the key in it: what a test playing the daemon signs rank credentials with.
  std::string RankKeyFile() const { return dir_.File("data") + "/rank-credentials.key"; }
  std::string RankKey() const;
  // The rank credential the server issues to the ranks of `job_id` attempt `attempt` placed on
  // `worker_id` (Assignment.rank_credential), made with RankKey as the server makes it, for a test
  // playing the daemon. Records `worker_id` as a worker with a standing credential, if it is not
  // one (a rank credential is valid only while its worker's is); placing the job is the test's.
  std::string IssueRankCredential(const std::string& job_id, int attempt,
                                  const std::string& worker_id);
  // Flags for a server that accepts workers: writes `join` to a join-token file in dir_ and
  // returns --join-token-file with fast heartbeats (200 ms) and a short lease (1500 ms).
  std::vector<std::string> WorkerProtocolArgs(const std::string& join) const;

  // A context with a 10 s deadline and, unless empty, `authorization: Bearer <token>`.
  static std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token,
                                                  int deadline_ms = 10000);

  // Creates a tenant through AdminService and returns a fresh token of it.
  std::string NewTenant(const std::string& name, bool admin = false);
  // SubmitJob / GetJob as `token` (a failed call fails the test and returns an empty Job).
  gantry::v1::Job SubmitJob(const std::string& token, const gantry::v1::JobSpec& spec);
  gantry::v1::Job GetJob(const std::string& token, const std::string& id);
  // Polls every 50 ms until the job is in `state` or in any terminal state, up to timeout_ms;
  // returns the job as last seen.
  gantry::v1::Job WaitForJob(const std::string& token, const std::string& id,
                             gantry::v1::JobState state, int timeout_ms);
  // Uploads the file at `path` as dataset `name` of `token`'s tenant (a header, then the file in
  // one chunk) and returns its id; a failed upload fails the test and returns "".
  std::string UploadDatasetFile(const std::string& token, const std::string& name,
                                const std::string& path);
  // A valid JobSpec (toy Monte Carlo data, tiny preset).
  static gantry::v1::JobSpec GoodSpec();
  // grpc.health.v1 Check for `service` ("" = the whole server); SERVING is 1.
  int HealthStatus(const std::string& service = "");

  TestDatabase db_;
  // How the stubs connect (null = plaintext); set before StartServer for a TLS server.
  std::shared_ptr<grpc::ChannelCredentials> client_credentials_;
  // When set, the server's --db instead of db_ (e.g. a PrivatePostgres the test stops and starts).
  std::string server_dsn_;
  TempDir dir_;
  std::string admin_token_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<gantry::v1::TrainingService::Stub> training_;
  std::unique_ptr<gantry::v1::GenerationService::Stub> generation_;
  std::unique_ptr<gantry::v1::CatalogService::Stub> catalog_;
  std::unique_ptr<gantry::v1::DatasetService::Stub> datasets_;
  std::unique_ptr<gantry::v1::WorkerService::Stub> worker_;
  std::unique_ptr<gantry::v1::AdminService::Stub> admin_;
  std::unique_ptr<gantry::v1::StudyService::Stub> studies_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

// "CODE: message" of a status, for assertion messages.
std::string Describe(const grpc::Status& status);

// Polls `done` every 10 ms up to `timeout_ms`.
template <typename Fn>
inline bool Eventually(Fn done, int timeout_ms = 5000) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SERVER_SERVER_FIXTURE_H_
