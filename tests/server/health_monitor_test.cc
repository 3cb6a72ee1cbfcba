// HealthMonitor on its own (no server, no database): which status each service gets, and that only
// changes are published.
#include "server/platform/health_monitor.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace gantry::server {
namespace {

TEST(HealthMonitorTest, DecideFollowsTheDatabaseAndTheServingWorkers) {
  std::map<std::string, bool> up = HealthMonitor::Decide(true, 1);
  for (const auto& [service, serving] : up) EXPECT_TRUE(serving) << service;
  EXPECT_EQ(up.size(), 7u);  // "" and the six gantry.v1 services

  std::map<std::string, bool> no_worker = HealthMonitor::Decide(true, 0);
  EXPECT_FALSE(no_worker.at("gantry.v1.GenerationService"));
  EXPECT_TRUE(no_worker.at(""));
  EXPECT_TRUE(no_worker.at("gantry.v1.TrainingService"));

  std::map<std::string, bool> down = HealthMonitor::Decide(false, 3);
  for (const char* s :
       {"", "gantry.v1.TrainingService", "gantry.v1.CatalogService", "gantry.v1.DatasetService",
        "gantry.v1.AdminService", "gantry.v1.GenerationService"}) {
    EXPECT_FALSE(down.at(s)) << s;
  }
  EXPECT_TRUE(down.at("gantry.v1.WorkerService"));
}

TEST(HealthMonitorTest, PublishesEveryStatusOnceThenOnlyChangesAndNothingAfterStop) {
  absl::Status database = absl::OkStatus();
  int workers = 0;
  std::vector<std::pair<std::string, bool>> published;
  HealthMonitor monitor(
      absl::ZeroDuration(), [&] { return database; }, [&] { return workers; },
      [&](const std::string& service, bool serving) { published.emplace_back(service, serving); });
  monitor.Start();  // period 0: one check, no thread
  EXPECT_EQ(published.size(), 7u);
  published.clear();
  monitor.CheckNow();
  EXPECT_TRUE(published.empty());

  workers = 1;
  monitor.CheckNow();
  ASSERT_EQ(published.size(), 1u);
  EXPECT_EQ(published[0], std::make_pair(std::string("gantry.v1.GenerationService"), true));
  published.clear();

  database = absl::UnavailableError("connection refused");
  monitor.CheckNow();
  EXPECT_EQ(published.size(), 6u);  // all but WorkerService
  for (const auto& [service, serving] : published) EXPECT_FALSE(serving) << service;
  published.clear();

  monitor.Stop();
  database = absl::OkStatus();
  monitor.CheckNow();
  EXPECT_TRUE(published.empty());
}

}  // namespace
}  // namespace gantry::server
