// CostRepository against a real PostgreSQL: attempts recorded at placement and closed by the
// transitions that end them (restart, terminal), device-hours and cost per job and pool, the
// restart's redone work priced, cost reports grouped and split at UTC midnights, monthly budgets
// and the throughput history of finished jobs.
#include "storage/cost_repository.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "storage/job_repository.h"
#include "storage/tenant_limits_repository.h"
#include "storage/transaction.h"
#include "tests/storage/storage_fixture.h"

namespace gantry::storage {
namespace {

namespace v1 = ::gantry::v1;

v1::JobSpec Spec(const std::string& model, int world_size = 2) {
  v1::JobSpec spec;
  spec.set_model_name(model);
  spec.set_model_preset("tiny");
  spec.set_dataset("toymc:events=100");
  spec.set_world_size(world_size);
  spec.mutable_hyper_parameters()->set_epochs(1);
  return spec;
}

AttemptUsage Usage(const v1::Job& job, int attempt, const std::string& pool, int devices,
                   double price) {
  AttemptUsage u;
  u.job_id = job.id();
  u.attempt = attempt;
  u.owner = job.owner();
  u.model_name = job.spec().model_name();
  u.preset = job.spec().model_preset();
  u.pool = pool;
  u.devices = devices;
  u.price_per_device_hour = price;
  return u;
}

class CostRepositoryTest : public StorageFixture {
 protected:
  // Runs SQL that moves recorded times (a test cannot wait hours).
  void Sql(const std::string& name, const std::string& sql) {
    ASSERT_TRUE(db_->Transact([&](Transaction& tx) {
                     tx.Exec(name, sql);
                     return absl::OkStatus();
                   })
                    .ok());
  }
  // A job of `owner` moved to PLACING (attempt 0).
  v1::Job Placed(const std::string& owner, const std::string& model, int world_size = 2) {
    JobRepository jobs(*db_);
    absl::StatusOr<v1::Job> job = jobs.Create(owner, Spec(model, world_size), "");
    EXPECT_TRUE(job.ok()) << job.status();
    absl::StatusOr<v1::Job> placed =
        jobs.Transition(job->id(), {v1::JOB_STATE_QUEUED}, v1::JOB_STATE_PLACING, "Placed", "");
    EXPECT_TRUE(placed.ok()) << placed.status();
    return *placed;
  }
};

TEST_F(CostRepositoryTest, AttemptsAreCountedFromPlacementToTheirEndAndRestartsPayTheRedoneWork) {
  JobRepository jobs(*db_);
  CostRepository costs(*db_);
  v1::Job job = Placed("alice", "ele");
  ASSERT_TRUE(*costs.StartAttempt(Usage(job, 0, "cloud", 2, 1.5)));
  EXPECT_FALSE(*costs.StartAttempt(Usage(job, 0, "cloud", 2, 9.0)))
      << "a repeat keeps the first start";
  Sql("usage_back_2h", "UPDATE job_usage SET started_at = now() - interval '2 hours'");

  // Running: accrued so far.
  v1::Job running = *jobs.Get("", job.id());
  ASSERT_TRUE(costs.FillUsage({&running}).ok());
  EXPECT_NEAR(running.device_hours(), 4.0, 0.01);  // 2 devices x 2 h
  EXPECT_NEAR(running.cost_usd(), 6.0, 0.02);
  ASSERT_EQ(running.pool_usage_size(), 1);
  EXPECT_EQ(running.pool_usage(0).pool(), "cloud");
  EXPECT_EQ(running.pool_usage(0).attempts(), 1);
  EXPECT_TRUE(running.cost_note().empty());

  // A restart ends attempt 0 and prices the work it redoes: 30 min x 2 devices x 1.5 USD.
  v1::Restart restart;
  restart.set_reason("WorkerLost");
  restart.set_counted(true);
  restart.set_redone_seconds(1800);
  ASSERT_TRUE(jobs.BeginRestart(job.id(), {v1::JOB_STATE_PLACING}, restart).ok());
  absl::StatusOr<std::vector<v1::JobEvent>> events = jobs.ListEvents(job.id(), 0, 100);
  ASSERT_TRUE(events.ok());
  const v1::JobEvent* restart_event = nullptr;
  for (const v1::JobEvent& e : *events) {
    if (e.has_restart()) restart_event = &e;
  }
  ASSERT_NE(restart_event, nullptr);
  EXPECT_NEAR(restart_event->restart().redone_device_hours(), 1.0, 1e-9);
  EXPECT_NEAR(restart_event->restart().redone_cost_usd(), 1.5, 1e-9);
  Sql("usage_closed_check",
      "DO $$ BEGIN IF EXISTS (SELECT 1 FROM job_usage WHERE ended_at IS NULL) THEN "
      "RAISE EXCEPTION 'attempt 0 still open'; END IF; END $$");

  // Attempt 1 in the same pool for 1 h, then the job ends: both attempts are paid.
  ASSERT_TRUE(*costs.StartAttempt(Usage(job, 1, "cloud", 2, 1.5)));
  Sql("usage_back_1h",
      "UPDATE job_usage SET started_at = now() - interval '1 hour' WHERE attempt = 1");
  ASSERT_TRUE(
      jobs.Transition(job.id(), {v1::JOB_STATE_RESTARTING}, v1::JOB_STATE_RUNNING, "Resumed", "")
          .ok());
  ASSERT_TRUE(
      jobs.Transition(job.id(), {v1::JOB_STATE_RUNNING}, v1::JOB_STATE_SUCCEEDED, "Done", "").ok());
  v1::Job done = *jobs.Get("", job.id());
  ASSERT_TRUE(costs.FillUsage({&done}).ok());
  EXPECT_NEAR(done.device_hours(), 6.0, 0.01);
  EXPECT_NEAR(done.cost_usd(), 9.0, 0.02);
  ASSERT_EQ(done.pool_usage_size(), 1);
  EXPECT_EQ(done.pool_usage(0).attempts(), 2);
  // Ended: the figures no longer grow, and a late start of an old attempt is refused.
  EXPECT_FALSE(*costs.StartAttempt(Usage(job, 1, "cloud", 2, 1.5)));
  EXPECT_FALSE(*costs.StartAttempt(Usage(job, 2, "cloud", 2, 1.5)));
}

TEST_F(CostRepositoryTest, UnpricedUsageCostsNothingAndSaysWhy) {
  CostRepository costs(*db_);
  v1::Job job = Placed("alice", "free");
  ASSERT_TRUE(*costs.StartAttempt(Usage(job, 0, "", 2, 0)));
  Sql("usage_back", "UPDATE job_usage SET started_at = now() - interval '1 hour'");
  v1::Job other = Placed("bob", "static");
  ASSERT_TRUE(*costs.StartAttempt(Usage(other, 0, "onprem", 1, 0)));
  v1::Job untouched = Placed("bob", "never");
  ASSERT_TRUE(costs.FillUsage({&job, &other, &untouched}).ok());
  EXPECT_NEAR(job.device_hours(), 2.0, 0.01);
  EXPECT_EQ(job.cost_usd(), 0);
  EXPECT_EQ(job.cost_note(), "no pool: its workers have no price: counted at 0 USD");
  EXPECT_EQ(other.cost_note(), "pool onprem has no price: counted at 0 USD");
  EXPECT_EQ(untouched.pool_usage_size(), 0);
  EXPECT_EQ(untouched.device_hours(), 0);
}

TEST_F(CostRepositoryTest, ReportGroupsByTenantPoolModelAndDaySplitAtUtcMidnight) {
  CostRepository costs(*db_);
  v1::Job a = Placed("alice", "m1");
  v1::Job b = Placed("bob", "m2");
  ASSERT_TRUE(*costs.StartAttempt(Usage(a, 0, "cloud", 1, 1.0)));
  ASSERT_TRUE(*costs.StartAttempt(Usage(b, 0, "hpc", 4, 0.5)));
  // alice: 4 h across midnight (2 h on Oct 31, 2 h on Nov 1); bob: 2 h x 4 devices on Nov 1.
  Sql("usage_fix_a",
      "UPDATE job_usage SET started_at = '2026-10-31 22:00:00+00', "
      "ended_at = '2026-11-01 02:00:00+00' WHERE owner = 'alice'");
  Sql("usage_fix_b",
      "UPDATE job_usage SET started_at = '2026-11-01 10:00:00+00', "
      "ended_at = '2026-11-01 12:00:00+00' WHERE owner = 'bob'");
  auto at = [](const char* text) {
    absl::Time t;
    std::string err;
    EXPECT_TRUE(absl::ParseTime(absl::RFC3339_full, text, &t, &err)) << err;
    return t;
  };
  CostReportQuery q;
  q.start = at("2026-10-01T00:00:00Z");
  q.end = at("2026-12-01T00:00:00Z");
  q.by_tenant = true;
  q.by_day = true;
  absl::StatusOr<v1::CostReport> report = costs.Report(q);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->rows_size(), 3) << report->DebugString();
  EXPECT_EQ(report->rows(0).tenant(), "alice");
  EXPECT_EQ(report->rows(0).day(), "2026-10-31");
  EXPECT_NEAR(report->rows(0).device_hours(), 2.0, 1e-9);
  EXPECT_EQ(report->rows(1).day(), "2026-11-01");
  EXPECT_NEAR(report->rows(1).cost_usd(), 2.0, 1e-9);
  EXPECT_EQ(report->rows(2).tenant(), "bob");
  EXPECT_NEAR(report->rows(2).device_hours(), 8.0, 1e-9);
  EXPECT_NEAR(report->rows(2).cost_usd(), 4.0, 1e-9);
  EXPECT_NEAR(report->device_hours(), 12.0, 1e-9);
  EXPECT_NEAR(report->cost_usd(), 8.0, 1e-9);
  EXPECT_TRUE(report->rows(0).pool().empty()) << "not grouped by pool";

  // One tenant only, by pool and model, clipped to November.
  CostReportQuery alice;
  alice.tenant = "alice";
  alice.by_pool = alice.by_model = true;
  alice.start = at("2026-11-01T00:00:00Z");
  alice.end = q.end;
  report = costs.Report(alice);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->rows_size(), 1);
  EXPECT_EQ(report->rows(0).pool(), "cloud");
  EXPECT_EQ(report->rows(0).model_name(), "m1");
  EXPECT_TRUE(report->rows(0).tenant().empty());
  EXPECT_NEAR(report->rows(0).device_hours(), 2.0, 1e-9);
  EXPECT_EQ(report->rows(0).jobs(), 1);

  // A pool filter with no groups: one total row; an empty range: no row.
  CostReportQuery hpc;
  hpc.pool = "hpc";
  hpc.start = q.start;
  hpc.end = q.end;
  report = costs.Report(hpc);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->rows_size(), 1);
  EXPECT_NEAR(report->rows(0).cost_usd(), 4.0, 1e-9);
  hpc.start = at("2026-12-01T00:00:00Z");
  hpc.end = at("2026-12-02T00:00:00Z");
  EXPECT_EQ(costs.Report(hpc)->rows_size(), 0);

  // Spend per tenant since November 1st.
  absl::StatusOr<std::map<std::string, double>> spend =
      costs.SpendSince(at("2026-11-01T00:00:00Z"));
  ASSERT_TRUE(spend.ok());
  EXPECT_NEAR(spend->at("alice"), 2.0, 1e-9);
  EXPECT_NEAR(spend->at("bob"), 4.0, 1e-9);
}

TEST_F(CostRepositoryTest, MonthlyBudgetsAreCheckedStoredAndKeptBySetLimits) {
  CostRepository costs(*db_);
  EXPECT_FALSE(costs.MonthlyBudget("alice")->has_value());
  EXPECT_EQ(costs.SetMonthlyBudget("alice", -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(costs.SetMonthlyBudget("alice", std::nan("")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(costs.SetMonthlyBudget("alice", std::numeric_limits<double>::infinity()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(costs.SetMonthlyBudget("nobody", 5).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(costs.SetMonthlyBudget("alice", 25).ok());
  ASSERT_TRUE(costs.SetMonthlyBudget("bob", 0).ok());
  // The other limits' path leaves the budget alone.
  TenantLimitsRepository limits(*db_);
  TenantLimits::Overrides o;
  o.max_concurrent_jobs = 3;
  ASSERT_TRUE(limits.Set("alice", o).ok());
  EXPECT_EQ(costs.MonthlyBudget("alice")->value_or(-1), 25);
  absl::StatusOr<std::map<std::string, double>> budgets = costs.MonthlyBudgets();
  ASSERT_TRUE(budgets.ok());
  EXPECT_EQ(budgets->size(), 1u) << "bob's 0 is unlimited";
  EXPECT_EQ(budgets->at("alice"), 25);
  ASSERT_TRUE(costs.SetMonthlyBudget("alice", std::nullopt).ok());
  EXPECT_FALSE(costs.MonthlyBudget("alice")->has_value());
}

TEST_F(CostRepositoryTest, HistoryIsTheMedianPerRankRateOfFinishedJobs) {
  JobRepository jobs(*db_);
  CostRepository costs(*db_);
  for (double rate : {100.0, 300.0, 900.0}) {  // world size 2: 50, 150, 450 per rank
    v1::Job job = Placed("alice", "h");
    ASSERT_TRUE(*costs.StartAttempt(Usage(job, 0, "", 2, 0)));
    v1::Progress progress;
    progress.set_samples_per_second(rate);
    ASSERT_TRUE(jobs.UpdateProgress(job.id(), progress).ok());
    ASSERT_TRUE(
        jobs.Transition(job.id(), {v1::JOB_STATE_PLACING}, v1::JOB_STATE_SUCCEEDED, "Done", "")
            .ok());
  }
  v1::Job failed = Placed("alice", "h");  // not finished successfully: not history
  ASSERT_TRUE(*costs.StartAttempt(Usage(failed, 0, "", 2, 0)));
  absl::StatusOr<ThroughputHistory> h = costs.History("tiny", v1::DEVICE_KIND_CPU);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->jobs, 3);
  EXPECT_DOUBLE_EQ(h->median_samples_per_second_per_rank, 150.0);
  EXPECT_EQ(costs.History("tiny", v1::DEVICE_KIND_GPU)->jobs, 0);
  EXPECT_EQ(costs.History("3dgan-25", v1::DEVICE_KIND_CPU)->jobs, 0);
}

}  // namespace
}  // namespace gantry::storage
