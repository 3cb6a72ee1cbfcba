// grpc.health.v1 against the real gantry-server: statuses follow a private PostgreSQL that the test
// stops and starts (services that need it NOT_SERVING while it is down, SERVING again after), and
// GenerationService follows the workers that serve generation (a worker registered with an
// endpoint on a live control stream). The real gantry-worker daemon's side is in
// tests/e2e/health_e2e_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/driver_worker.h"
#include "tests/server/server_fixture.h"
#include "tests/support/private_postgres.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

constexpr int kServing = 1;
constexpr int kNotServing = 2;
const char* const kDatabaseServices[] = {"", "gantry.v1.TrainingService",
                                         "gantry.v1.CatalogService", "gantry.v1.DatasetService",
                                         "gantry.v1.AdminService"};

class ServerHealthTest : public ServerFixture {
 protected:
  std::vector<std::string> Args() {
    std::vector<std::string> args = WorkerProtocolArgs(join_);
    args.push_back("--health-check-interval-ms=200");
    return args;
  }

  std::unique_ptr<PrivatePostgres> pg_;  // outlives the server (stopped in TearDown)
  std::string join_ = "server-health-join-token-0123456789";
};

TEST_F(ServerHealthTest, DatabaseServicesFollowPostgresAndComeBack) {
  pg_ = std::make_unique<PrivatePostgres>();
  ASSERT_FALSE(pg_->dsn().empty());
  server_dsn_ = pg_->dsn();
  StartServer(Args());
  for (const char* service : kDatabaseServices) {
    EXPECT_EQ(HealthStatus(service), kServing) << "'" << service << "'";
  }
  EXPECT_EQ(HealthStatus("gantry.v1.WorkerService"), kServing);

  ASSERT_TRUE(pg_->Stop());
  for (const char* service : kDatabaseServices) {
    EXPECT_TRUE(Eventually([&] { return HealthStatus(service) == kNotServing; }, 10000))
        << "'" << service << "' is " << HealthStatus(service) << " with PostgreSQL stopped";
  }
  EXPECT_EQ(HealthStatus("gantry.v1.GenerationService"), kNotServing);
  // The worker protocol rides out an outage from memory: its service stays SERVING.
  EXPECT_EQ(HealthStatus("gantry.v1.WorkerService"), kServing);
  EXPECT_NE(server_->Stderr().find("PostgreSQL unreachable"), std::string::npos)
      << server_->Stderr();

  ASSERT_TRUE(pg_->Start());
  for (const char* service : kDatabaseServices) {
    EXPECT_TRUE(Eventually([&] { return HealthStatus(service) == kServing; }, 15000))
        << "'" << service << "' is " << HealthStatus(service) << " after PostgreSQL restarted";
  }
  // And the server really answers from the database again.
  const std::string token = NewTenant("physics");
  EXPECT_FALSE(token.empty());
}

TEST_F(ServerHealthTest, GenerationServiceServesOnlyWhileAWorkerCanGenerate) {
  StartServer(Args());
  EXPECT_EQ(HealthStatus(""), kServing);
  EXPECT_EQ(HealthStatus("gantry.v1.GenerationService"), kNotServing) << "no worker yet";

  // A worker that does not serve generation (no endpoint) changes nothing.
  auto trainer = std::make_unique<DriverWorker>(channel_, join_, "trainer-only", 1);
  ASSERT_TRUE(trainer->status().ok()) << Describe(trainer->status());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(HealthStatus("gantry.v1.GenerationService"), kNotServing);

  auto server = std::make_unique<DriverWorker>(
      channel_, join_, "generator", 1, std::vector<std::string>{},
      DriverServing{"127.0.0.1:1", "generation-secret-0123456789abcdef"});
  ASSERT_TRUE(server->status().ok()) << Describe(server->status());
  EXPECT_TRUE(
      Eventually([&] { return HealthStatus("gantry.v1.GenerationService") == kServing; }, 5000));

  // Its stream ends: no worker serves generation any more.
  server.reset();
  EXPECT_TRUE(Eventually([&] { return HealthStatus("gantry.v1.GenerationService") == kNotServing; },
                         10000));
  EXPECT_EQ(HealthStatus(""), kServing);
}

}  // namespace
}  // namespace gantry::testing
