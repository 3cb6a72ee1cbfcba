// Unit tests of the Scheduler's tenant policies: per-pool slot quotas, fair share by weight, and
// reservations that let large gangs start behind a stream of small jobs.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"

namespace gantry::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const absl::Time kT0 = absl::FromUnixSeconds(1800000000);

WorkerState Worker(const std::string& id, int slots, const std::string& pool = "") {
  WorkerState w;
  w.id = id;
  w.name = id;
  w.slots = slots;
  if (!pool.empty()) w.labels["pool"] = pool;
  w.host = id + ".example";
  return w;
}

JobRequest Job(const std::string& id, const std::string& tenant, int world_size,
               absl::Duration submitted_after = absl::ZeroDuration(),
               const std::string& pool = "") {
  JobRequest j;
  j.id = id;
  j.tenant = tenant;
  j.world_size = world_size;
  j.submitted = kT0 + submitted_after;
  if (!pool.empty()) j.selector["pool"] = pool;
  return j;
}

std::vector<std::string> PlacedIds(const std::vector<Placement>& placements) {
  std::vector<std::string> ids;
  for (const Placement& p : placements) ids.push_back(p.job_id);
  return ids;
}

class FairShareTest : public ::testing::Test {
 protected:
  explicit FairShareTest(bool reservations = true)
      : scheduler_(SchedulerOptions{absl::Seconds(15), reservations}) {}
  void Add(const WorkerState& w) {
    scheduler_.UpsertWorker(w, kT0);
    ASSERT_TRUE(scheduler_.Heartbeat(w.id, w.slots, {}, kT0).ok());
  }
  Scheduler scheduler_;
};

TEST_F(FairShareTest, QuotaMakesAJobWaitWithItsReasonUntilTheTenantsOtherJobEnds) {
  Add(Worker("wrk-hpc", 16, "hpc"));
  TenantPolicy alice;
  alice.max_slots_per_pool = {{"hpc", 8}};
  ASSERT_TRUE(scheduler_.SetTenantPolicies({{"alice", alice}}).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-a6", "alice", 6, absl::Seconds(0), "hpc")).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-a4", "alice", 4, absl::Seconds(1), "hpc")).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-b4", "bob", 4, absl::Seconds(2), "hpc")).ok());

  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-a6", "job-b4"));
  EXPECT_EQ(scheduler_.WaitReason("job-a4"),
            "waiting: tenant alice holds 6 of its 8 slots on pool hpc; this job needs 4");
  EXPECT_EQ(scheduler_.TenantSlots("alice", "hpc"), 6);
  EXPECT_EQ(scheduler_.TenantSlots("bob", std::nullopt), 4);
  EXPECT_TRUE(scheduler_.QueuedRequests().empty()) << "a job over its quota is no demand";
  EXPECT_EQ(scheduler_.FreeSlots("wrk-hpc"), 6) << "the quota, not the slots, holds it back";

  ASSERT_TRUE(scheduler_.Remove("job-a6"));
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-a4"));
  EXPECT_EQ(scheduler_.TenantSlots("alice", "hpc"), 4);
}

TEST_F(FairShareTest, QuotaCountsOnlyItsPoolAndAJobLargerThanTheQuotaSaysSo) {
  Add(Worker("wrk-hpc", 8, "hpc"));
  Add(Worker("wrk-cloud", 8, "cloud"));
  TenantPolicy alice;
  alice.max_slots_per_pool = {{"hpc", 2}};
  ASSERT_TRUE(scheduler_.SetTenantPolicies({{"alice", alice}}).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-cloud", "alice", 8, absl::Seconds(0), "cloud")).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-huge", "alice", 3, absl::Seconds(1), "hpc")).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-two", "alice", 2, absl::Seconds(2), "hpc")).ok());
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-cloud", "job-two"));
  EXPECT_EQ(scheduler_.WaitReason("job-huge"),
            "tenant alice may hold at most 2 slots on pool hpc and this job needs 3; it cannot run "
            "until an admin raises the quota (gantry admin tenants limits set)");
}

TEST_F(FairShareTest, BadPoliciesAreRefusedAndChangeNothing) {
  TenantPolicy zero;
  zero.weight = 0;
  absl::Status st = scheduler_.SetTenantPolicies({{"alice", zero}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("positive finite"));
  TenantPolicy negative;
  negative.max_slots_per_pool = {{"hpc", -1}};
  st = scheduler_.SetTenantPolicies({{"alice", negative}});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("negative"));
  TenantPolicy nan;
  nan.weight = std::nan("");
  EXPECT_FALSE(scheduler_.SetTenantPolicies({{"alice", nan}}).ok());
}

TEST_F(FairShareTest, FreeSlotsAreSharedByWeightAmongEqualPriority) {
  Add(Worker("wrk-a", 8));
  TenantPolicy heavy;
  heavy.weight = 3;
  ASSERT_TRUE(scheduler_.SetTenantPolicies({{"heavy", heavy}}).ok());
  // "light" submitted everything first: FIFO alone would give it all eight slots.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(
        scheduler_.Submit(Job(absl::StrCat("job-l", i), "light", 1, absl::Seconds(i))).ok());
    ASSERT_TRUE(
        scheduler_.Submit(Job(absl::StrCat("job-h", i), "heavy", 1, absl::Seconds(100 + i))).ok());
  }
  EXPECT_EQ(scheduler_.Schedule(kT0).size(), 8u);
  EXPECT_EQ(scheduler_.TenantSlots("light", std::nullopt), 2);
  EXPECT_EQ(scheduler_.TenantSlots("heavy", std::nullopt), 6);
  // Priority still comes first.
  JobRequest urgent = Job("job-urgent", "light", 1, absl::Seconds(500));
  urgent.priority = 5;
  ASSERT_TRUE(scheduler_.Submit(urgent).ok());
  ASSERT_TRUE(scheduler_.Remove("job-h0"));
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-urgent"));
}

TEST_F(FairShareTest, ATenantAloneGetsEveryFreeSlot) {
  Add(Worker("wrk-a", 4));
  Add(Worker("wrk-b", 4));
  TenantPolicy tiny;
  tiny.weight = 0.01;
  ASSERT_TRUE(scheduler_.SetTenantPolicies({{"solo", tiny}}).ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(scheduler_.Submit(Job(absl::StrCat("job-", i), "solo", 1, absl::Seconds(i))).ok());
  }
  EXPECT_EQ(scheduler_.Schedule(kT0).size(), 8u);
  EXPECT_EQ(scheduler_.FreeSlots("wrk-a") + scheduler_.FreeSlots("wrk-b"), 0);
}

// A stream of world_size-1 jobs keeps eight one-slot workers busy; a world_size-8 gang arrives.
// Each step one small job ends and another is submitted. Returns the step at which the gang
// started, or -1 when it had not after `steps`.
int StepsUntilGangStarts(Scheduler& scheduler, int steps) {
  for (int i = 0; i < 8; ++i) {
    WorkerState w = Worker(absl::StrCat("wrk-", i), 1);
    scheduler.UpsertWorker(w, kT0);
    EXPECT_TRUE(scheduler.Heartbeat(w.id, 1, {}, kT0).ok());
  }
  int next = 0;
  auto submit_small = [&] {
    EXPECT_TRUE(
        scheduler.Submit(Job(absl::StrCat("job-small-", next), "stream", 1, absl::Seconds(next)))
            .ok());
    ++next;
  };
  for (int i = 0; i < 8; ++i) submit_small();
  EXPECT_EQ(scheduler.Schedule(kT0).size(), 8u);
  EXPECT_TRUE(scheduler.Submit(Job("job-gang", "science", 8, absl::Seconds(8))).ok());
  for (int step = 0; step < steps; ++step) {
    std::vector<std::string> placed = scheduler.PlacedJobs();
    for (const std::string& id : placed) {
      if (id != "job-gang") {
        EXPECT_TRUE(scheduler.Remove(id));
        break;
      }
    }
    submit_small();
    submit_small();
    for (const Placement& p : scheduler.Schedule(kT0)) {
      if (p.job_id == "job-gang") {
        EXPECT_EQ(p.rank_workers.size(), 8u);
        return step;
      }
    }
  }
  return -1;
}

TEST_F(FairShareTest, ReservationLetsAGangOfEightStartDespiteAStreamOfSingleRankJobs) {
  const int started = StepsUntilGangStarts(scheduler_, 50);
  EXPECT_EQ(started, 7) << "the gang starts as soon as the eighth small job ends";
}

TEST_F(FairShareTest, WhileAGangWaitsItsReservationIsInTheMessages) {
  for (int i = 0; i < 4; ++i) Add(Worker(absl::StrCat("wrk-", i), 2));
  ASSERT_TRUE(scheduler_.Submit(Job("job-run", "stream", 6)).ok());
  ASSERT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-run"));
  ASSERT_TRUE(scheduler_.Submit(Job("job-gang", "science", 8, absl::Seconds(1))).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-one", "stream", 1, absl::Seconds(2))).ok());
  EXPECT_THAT(scheduler_.Schedule(kT0), IsEmpty());
  EXPECT_EQ(scheduler_.WaitReason("job-gang"),
            "waiting for 8 free slots matching device CPU (2 free); 4 workers are reserved for it, "
            "so smaller jobs do not take their slots as they free up");
  EXPECT_EQ(scheduler_.WaitReason("job-one"),
            "2 free slots match device CPU but they are reserved for job-gang, a larger job ahead "
            "of this one");
}

TEST_F(FairShareTest, AGangLargerThanEveryMatchingWorkerReservesNothing) {
  Add(Worker("wrk-a", 2));
  ASSERT_TRUE(scheduler_.Submit(Job("job-big", "a", 3)).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-small", "a", 1, absl::Seconds(1))).ok());
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-small"));
}

class NoReservationTest : public FairShareTest {
 protected:
  NoReservationTest() : FairShareTest(/*reservations=*/false) {}
};

TEST_F(NoReservationTest, WithoutReservationsTheGangStarves) {
  EXPECT_EQ(StepsUntilGangStarts(scheduler_, 50), -1);
}

}  // namespace
}  // namespace gantry::scheduler
