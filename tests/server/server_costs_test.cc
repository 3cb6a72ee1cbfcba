// Costs through the real gantry-server: SubmitJob with validate_only (the same errors as a submit,
// estimates on each eligible pool with their basis, nothing created), GetCostReport (tenant
// isolation, groups, bad input) and monthly budgets (bad values, a queued job that waits with a
// message saying so, a submit refused when its estimate exceeds what is left).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "storage/database.h"
#include "storage/transaction.h"
#include "tests/server/server_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

class ServerCostsTest : public ServerFixture {
 protected:
  // The fixture's server starts with these.
  std::vector<std::string> SetUpServerArgs() const override { return {"--budget-refresh-ms=200"}; }

  void CreatePool(const std::string& name, double price, bool preemptible = false,
                  v1::DeviceKind device = v1::DEVICE_KIND_CPU) {
    v1::CreatePoolRequest request;
    request.set_name(name);
    request.mutable_spec()->set_device(device);
    request.mutable_spec()->set_price_per_device_hour(price);
    request.mutable_spec()->set_preemptible(preemptible);
    request.mutable_spec()->mutable_provisioner()->mutable_static_();
    v1::Pool pool;
    grpc::Status s = admin_->CreatePool(Ctx(admin_token_).get(), request, &pool);
    ASSERT_TRUE(s.ok()) << Describe(s);
  }

  grpc::Status Submit(const std::string& token, const v1::JobSpec& spec, bool validate_only,
                      v1::Job* job) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    request.set_validate_only(validate_only);
    return training_->SubmitJob(Ctx(token).get(), request, job);
  }

  grpc::Status Report(const std::string& token, v1::GetCostReportRequest request,
                      v1::CostReport* report) {
    return training_->GetCostReport(Ctx(token).get(), request, report);
  }

  // Usage of `job_id` (attempt 99, not a real placement): `devices` x `minutes` at `price`,
  // ending now, written straight into PostgreSQL (no test can wait for hours of training).
  void InsertUsage(const std::string& job_id, const std::string& owner, const std::string& pool,
                   int devices, int minutes, double price) {
    auto db = storage::Database::Create(db_.dsn(), 1);
    ASSERT_TRUE(db.ok()) << db.status();
    absl::Status st = (*db)->Transact([&](storage::Transaction& tx) {
      tx.Exec("test_usage",
              "INSERT INTO job_usage (job_id, attempt, owner, model_name, preset, pool, device, "
              "devices, price_per_device_hour, started_at, ended_at) VALUES ($1, 99, $2, 'm', "
              "'tiny', $3, 'DEVICE_KIND_CPU', $4, $5, now() - $6 * interval '1 minute', now())",
              job_id, owner, pool, devices, price, minutes);
      return absl::OkStatus();
    });
    ASSERT_TRUE(st.ok()) << st;
  }

  grpc::Status SetBudget(const std::string& tenant, double usd) {
    v1::SetTenantLimitsRequest request;
    request.set_tenant(tenant);
    request.mutable_overrides()->set_monthly_budget_usd(usd);
    v1::TenantLimitsInfo info;
    return admin_->SetTenantLimits(Ctx(admin_token_).get(), request, &info);
  }
};

TEST_F(ServerCostsTest, ValidateOnlyChecksLikeSubmitAndEstimatesEveryEligiblePool) {
  const std::string alice = NewTenant("alice");
  CreatePool("dear", 2.0);
  CreatePool("cheap", 0.5);
  CreatePool("spot", 0.1, /*preemptible=*/true);
  CreatePool("gpus", 3.0, false, v1::DEVICE_KIND_GPU);

  // Bad specs: the same status as a real submit.
  v1::JobSpec bad = GoodSpec();
  bad.set_world_size(0);
  v1::JobSpec unknown_pool = GoodSpec();
  unknown_pool.set_pool("nowhere");
  for (const v1::JobSpec& spec : {bad, unknown_pool}) {
    v1::Job dry, real;
    grpc::Status a = Submit(alice, spec, true, &dry);
    grpc::Status b = Submit(alice, spec, false, &real);
    EXPECT_EQ(a.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(a);
    EXPECT_EQ(a.error_code(), b.error_code());
    EXPECT_EQ(a.error_message(), b.error_message());
  }

  // Eligible CPU pools, not preemptible: cheap then dear, each from the calibration table.
  v1::Job dry;
  grpc::Status s = Submit(alice, GoodSpec(), true, &dry);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_TRUE(dry.id().empty());
  EXPECT_EQ(dry.state(), v1::JOB_STATE_UNSPECIFIED);
  ASSERT_EQ(dry.estimates_size(), 2) << dry.DebugString();
  EXPECT_EQ(dry.estimates(0).pool(), "cheap");
  EXPECT_EQ(dry.estimates(1).pool(), "dear");
  for (const v1::CostEstimate& e : dry.estimates()) {
    EXPECT_TRUE(absl::StartsWith(e.basis(), "calibration table: preset tiny on device kind CPU"))
        << e.basis();
    EXPECT_EQ(e.samples(), 2 * 57) << "2 epochs x (64 events - 10% hold-out)";
    EXPECT_GT(e.duration_seconds(), 0);
    EXPECT_NEAR(e.device_hours(), e.duration_seconds() / 3600.0 * 2, 1e-12);
    EXPECT_NEAR(e.cost_usd(), e.device_hours() * e.price_per_device_hour(), 1e-12);
    EXPECT_LT(e.scaling_efficiency(), 1.0);
  }
  EXPECT_LT(dry.estimates(0).cost_usd(), dry.estimates(1).cost_usd());

  // Preemptible allowed: spot comes first; a named pool alone.
  v1::JobSpec preemptible = GoodSpec();
  preemptible.set_allow_preemptible(true);
  ASSERT_TRUE(Submit(alice, preemptible, true, &dry).ok());
  ASSERT_EQ(dry.estimates_size(), 3);
  EXPECT_EQ(dry.estimates(0).pool(), "spot");
  v1::JobSpec named = GoodSpec();
  named.set_pool("dear");
  ASSERT_TRUE(Submit(alice, named, true, &dry).ok());
  ASSERT_EQ(dry.estimates_size(), 1);
  EXPECT_EQ(dry.estimates(0).pool(), "dear");
  // tiny-template has its own calibration entry.
  v1::JobSpec with_template = GoodSpec();
  with_template.set_model_preset("tiny-template");
  ASSERT_TRUE(Submit(alice, with_template, true, &dry).ok());
  ASSERT_EQ(dry.estimates_size(), 2);
  EXPECT_TRUE(absl::StartsWith(dry.estimates(0).basis(),
                               "calibration table: preset tiny-template on device kind CPU"))
      << dry.estimates(0).basis();
  EXPECT_GT(dry.estimates(0).samples_per_second_per_rank(), 0);
  // No measurement for this preset on GPUs: the basis says so instead of inventing one.
  v1::JobSpec gpu = GoodSpec();
  gpu.mutable_resources_per_rank()->set_device(v1::DEVICE_KIND_GPU);
  ASSERT_TRUE(Submit(alice, gpu, true, &dry).ok());
  ASSERT_EQ(dry.estimates_size(), 1);
  EXPECT_EQ(dry.estimates(0).pool(), "gpus");
  EXPECT_EQ(dry.estimates(0).cost_usd(), 0);
  EXPECT_TRUE(absl::StartsWith(dry.estimates(0).basis(), "no estimate:"))
      << dry.estimates(0).basis();

  // Nothing was created.
  v1::ListJobsResponse listed;
  ASSERT_TRUE(training_->ListJobs(Ctx(alice).get(), v1::ListJobsRequest(), &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 0);
}

TEST_F(ServerCostsTest, CostReportShowsTenantsTheirOwnAndRejectsBadInput) {
  const std::string alice = NewTenant("alice");
  const std::string bob = NewTenant("bob");
  CreatePool("cloud", 1.2);
  const v1::Job a = SubmitJob(alice, GoodSpec());
  const v1::Job b = SubmitJob(bob, GoodSpec());
  ASSERT_FALSE(a.id().empty());
  InsertUsage(a.id(), "alice", "cloud", 2, 30, 1.2);  // 1 device-h, 1.2 USD
  InsertUsage(b.id(), "bob", "cloud", 4, 30, 1.2);    // 2 device-h, 2.4 USD

  v1::GetCostReportRequest by_tenant;
  by_tenant.add_group_by("tenant");
  by_tenant.add_group_by("pool");
  v1::CostReport report;
  grpc::Status s = Report(alice, by_tenant, &report);
  ASSERT_TRUE(s.ok()) << Describe(s);
  ASSERT_EQ(report.rows_size(), 1) << report.DebugString();
  EXPECT_EQ(report.rows(0).tenant(), "alice");
  EXPECT_EQ(report.rows(0).pool(), "cloud");
  EXPECT_NEAR(report.rows(0).device_hours(), 1.0, 1e-6);
  EXPECT_NEAR(report.cost_usd(), 1.2, 1e-6);

  v1::GetCostReportRequest other = by_tenant;
  other.set_tenant("bob");
  EXPECT_EQ(Report(alice, other, &report).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  other.set_tenant("*");
  EXPECT_EQ(Report(alice, other, &report).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(Report(admin_token_, other, &report).ok());
  ASSERT_EQ(report.rows_size(), 2);
  EXPECT_EQ(report.rows(1).tenant(), "bob");
  EXPECT_NEAR(report.cost_usd(), 3.6, 1e-6);
  // GetJob shows the job's own usage.
  const v1::Job got = GetJob(alice, a.id());
  EXPECT_NEAR(got.device_hours(), 1.0, 1e-6);
  EXPECT_NEAR(got.cost_usd(), 1.2, 1e-6);
  ASSERT_EQ(got.pool_usage_size(), 1);

  struct Bad {
    v1::GetCostReportRequest request;
    std::string says;
  };
  std::vector<Bad> bad(4);
  bad[0].request.add_group_by("dya");
  bad[0].says = "group_by[0]";
  bad[1].request.add_group_by("day");
  bad[1].request.add_group_by("day");
  bad[1].says = "given twice";
  bad[2].request.mutable_start_time()->set_seconds(absl::ToUnixSeconds(absl::Now()));
  bad[2].request.mutable_end_time()->set_seconds(absl::ToUnixSeconds(absl::Now()) - 3600);
  bad[2].says = "is not before end_time";
  bad[3].request.set_pool("nowhere");
  bad[3].says = "no pool is named \"nowhere\"";
  for (const Bad& b : bad) {
    grpc::Status st = Report(alice, b.request, &report);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(st);
    EXPECT_TRUE(absl::StrContains(st.error_message(), b.says)) << st.error_message();
  }
}

TEST_F(ServerCostsTest, SpentBudgetHoldsQueuedJobsAndRefusesEstimatesAboveWhatIsLeft) {
  const std::string alice = NewTenant("alice");
  CreatePool("cloud", 40.0);  // tiny jobs cost cents even at this price
  EXPECT_EQ(SetBudget("alice", -1).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  grpc::Status nan = SetBudget("alice", std::nan(""));
  EXPECT_EQ(nan.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(nan.error_message(), "overrides.monthly_budget_usd"))
      << nan.error_message();
  ASSERT_TRUE(SetBudget("alice", 25).ok());
  v1::GetTenantLimitsRequest get;
  get.set_tenant("alice");
  v1::TenantLimitsInfo info;
  ASSERT_TRUE(admin_->GetTenantLimits(Ctx(admin_token_).get(), get, &info).ok());
  EXPECT_EQ(info.overrides().monthly_budget_usd(), 25);
  EXPECT_EQ(info.effective().monthly_budget_usd(), 25);

  // Under budget: accepted and queued (no worker is connected).
  const v1::Job queued = SubmitJob(alice, GoodSpec());
  ASSERT_FALSE(queued.id().empty());
  // 30 USD spent this month (1 device x 1 min at 1800 USD/h): the queued job waits for budget.
  InsertUsage(queued.id(), "alice", "cloud", 1, 1, 1800);
  const std::string month = absl::FormatTime("%Y-%m", absl::Now(), absl::UTCTimeZone());
  const std::string expected =
      absl::StrCat("waiting: tenant alice spent 30.00 of its 25.00 USD budget for ", month);
  v1::Job seen;
  EXPECT_TRUE(Eventually(
      [&] {
        seen = GetJob(alice, queued.id());
        return absl::StartsWith(seen.message(), expected);
      },
      10000))
      << seen.message();
  EXPECT_EQ(seen.state(), v1::JOB_STATE_QUEUED);
  EXPECT_TRUE(absl::StrContains(seen.message(), "--monthly-budget-usd")) << seen.message();

  // A new submit whose estimate exceeds what is left is refused, naming the numbers.
  v1::Job refused;
  grpc::Status s = Submit(alice, GoodSpec(), false, &refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "has 0.00 of its 25.00 USD budget for " + month))
      << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "on its cheapest pool cloud"))
      << s.error_message();

  // Unlimited again: the job is no longer held for budget.
  ASSERT_TRUE(SetBudget("alice", 0).ok());
  EXPECT_TRUE(Eventually(
      [&] {
        seen = GetJob(alice, queued.id());
        return !absl::StrContains(seen.message(), "budget");
      },
      10000))
      << seen.message();
  EXPECT_EQ(seen.state(), v1::JOB_STATE_QUEUED);
}

}  // namespace
}  // namespace gantry::testing
