// Costs end to end: a priced pool with one real daemon; `gantry jobs submit --dry-run` estimates
// the job from the calibration table, the job trains, GetJob carries device-hours and cost
// (price x device-hours, within the job's wall time), `gantry costs --json` groups it by tenant,
// pool and model, and a second dry run estimates from the finished job's history.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "google/protobuf/util/json_util.h"
#include "tests/e2e/worker_pool_fixture.h"
#include "tests/support/build_paths.h"

namespace gantry::testing {
namespace {

class CostsE2eTest : public WorkerPoolFixture {
 protected:
  // Runs the CLI as the test's tenant; returns its stdout, fails the test on a non-zero exit.
  std::string Cli(const std::vector<std::string>& args) {
    std::string command = std::string("'") + GANTRY_CLI_BINARY + "' --server " +
                          server_->address() + " --token " + token_;
    for (const std::string& a : args) command += " '" + a + "'";
    command += " 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    EXPECT_NE(pipe, nullptr);
    if (pipe == nullptr) return "";
    std::string out;
    std::array<char, 4096> buffer;
    size_t n;
    while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), n);
    const int status = pclose(pipe);
    EXPECT_EQ(status, 0) << command << "\n" << out;
    return out;
  }

  template <typename Message>
  Message Parse(const std::string& json) {
    Message m;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    auto status = google::protobuf::util::JsonStringToMessage(json, &m, options);
    EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
    return m;
  }

  std::vector<std::string> DryRunArgs() {
    return {"jobs",         "submit",
            "--dry-run",    "--json",
            "--name",       "e2e-costs",
            "--preset",     "tiny",
            "--dataset",    "toymc:layout=25,events=80,seed=5,emin=20,emax=200",
            "--epochs",     "1",
            "--batch",      "4",
            "--world-size", "1"};
  }
};

TEST_F(CostsE2eTest, PricedPoolJobCarriesItsCostAndTheReportGroupsIt) {
  v1::CreatePoolRequest pool;
  pool.set_name("cloud");
  pool.mutable_spec()->set_price_per_device_hour(0.9);
  pool.mutable_spec()->mutable_provisioner()->mutable_static_();
  v1::Pool created;
  ASSERT_TRUE(admin_->CreatePool(Ctx(admin_token_).get(), pool, &created).ok());
  worker_extra_args_ = {"--labels=pool=cloud"};
  StartWorker("w-cloud", 51010);
  WaitForFreeWorkers(1);

  // Before: an estimate on the pool from the calibration table; nothing is submitted.
  const v1::Job dry = Parse<v1::Job>(Cli(DryRunArgs()));
  ASSERT_EQ(dry.estimates_size(), 1) << dry.DebugString();
  EXPECT_EQ(dry.estimates(0).pool(), "cloud");
  EXPECT_TRUE(absl::StartsWith(dry.estimates(0).basis(), "calibration table:"))
      << dry.estimates(0).basis();
  EXPECT_GT(dry.estimates(0).cost_usd(), 0);
  EXPECT_TRUE(dry.id().empty());

  v1::JobSpec spec = Spec(0);
  spec.set_display_name("e2e-costs");
  spec.set_world_size(1);
  spec.mutable_hyper_parameters()->set_epochs(1);
  const auto submitted = std::chrono::steady_clock::now();
  const v1::Job job = Submit(spec);
  ASSERT_FALSE(job.id().empty());
  const v1::Job done = WaitForState(job.id(), v1::JOB_STATE_SUCCEEDED, 90);
  const double wall_hours =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - submitted).count() / 3600;
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.message() << "\n" << Logs();

  // After: device-hours within the job's wall time (one CPU rank), cost = price x device-hours.
  EXPECT_GT(done.device_hours(), 0);
  EXPECT_LE(done.device_hours(), wall_hours);
  EXPECT_NEAR(done.cost_usd(), 0.9 * done.device_hours(), 1e-12);
  ASSERT_EQ(done.pool_usage_size(), 1);
  EXPECT_EQ(done.pool_usage(0).pool(), "cloud");
  EXPECT_EQ(done.pool_usage(0).attempts(), 1);
  EXPECT_TRUE(done.cost_note().empty()) << done.cost_note();
  // An ended job's figures no longer grow.
  EXPECT_EQ(Get(job.id()).device_hours(), done.device_hours());

  const v1::CostReport report =
      Parse<v1::CostReport>(Cli({"costs", "--json", "--by", "tenant,pool,model"}));
  ASSERT_EQ(report.rows_size(), 1) << report.DebugString();
  EXPECT_EQ(report.rows(0).tenant(), "physics");
  EXPECT_EQ(report.rows(0).pool(), "cloud");
  EXPECT_EQ(report.rows(0).model_name(), "e2e-costs");
  EXPECT_EQ(report.rows(0).jobs(), 1);
  EXPECT_NEAR(report.rows(0).cost_usd(), done.cost_usd(), 1e-9);
  const std::string table = Cli({"costs", "--by", "pool"});
  EXPECT_TRUE(absl::StrContains(table, "cloud")) << table;

  // Now the finished job is the history the estimate is based on.
  const v1::Job again = Parse<v1::Job>(Cli(DryRunArgs()));
  ASSERT_EQ(again.estimates_size(), 1);
  EXPECT_TRUE(absl::StartsWith(again.estimates(0).basis(),
                               "history: 1 earlier job of preset tiny on device kind CPU"))
      << again.estimates(0).basis();
}

}  // namespace
}  // namespace gantry::testing
