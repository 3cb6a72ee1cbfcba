// Unit tests of the Scheduler: gang placement, queue order, matching, cache preference, packing,
// rendezvous ports, heartbeats and lost workers, adoption and wait reasons. Fake workers are plain
// WorkerState values and time is passed in.
#include "scheduler/scheduler.h"

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gantry::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

const absl::Time kT0 = absl::FromUnixSeconds(1800000000);

WorkerState Worker(const std::string& id, int slots, std::map<std::string, std::string> labels = {},
                   gantry::v1::DeviceKind device = gantry::v1::DEVICE_KIND_CPU) {
  WorkerState w;
  w.id = id;
  w.name = id + "-name";
  w.slots = slots;
  w.device = device;
  w.labels = std::move(labels);
  w.host = id + ".example";
  return w;
}

JobRequest Job(const std::string& id, int world_size, int priority = 0,
               absl::Duration submitted_after = absl::ZeroDuration()) {
  JobRequest j;
  j.id = id;
  j.world_size = world_size;
  j.priority = priority;
  j.submitted = kT0 + submitted_after;
  return j;
}

std::vector<std::string> PlacedIds(const std::vector<Placement>& placements) {
  std::vector<std::string> ids;
  for (const Placement& p : placements) ids.push_back(p.job_id);
  return ids;
}

class SchedulerTest : public ::testing::Test {
 protected:
  explicit SchedulerTest(bool reservations = true)
      : scheduler_(SchedulerOptions{absl::Seconds(15), reservations}) {}
  // Registers a worker and sends its first heartbeat (all its slots free).
  void Add(const WorkerState& w, absl::Time now = kT0) {
    scheduler_.UpsertWorker(w, now);
    ASSERT_TRUE(scheduler_.Heartbeat(w.id, w.slots, w.cached_datasets, now).ok());
  }
  Scheduler scheduler_;
};

// Backfill as it is without reservations (tests/scheduler/fair_share_test.cc has them on).
class SchedulerWithoutReservationsTest : public SchedulerTest {
 protected:
  SchedulerWithoutReservationsTest() : SchedulerTest(/*reservations=*/false) {}
};

TEST_F(SchedulerTest, GangIsNeverPlacedPartially) {
  Add(Worker("wrk-a", 1));
  Add(Worker("wrk-b", 1));
  Add(Worker("wrk-c", 1));
  ASSERT_TRUE(scheduler_.Submit(Job("job-filler", 1)).ok());
  ASSERT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-filler"));
  ASSERT_TRUE(scheduler_.Submit(Job("job-gang", 3, 0, absl::Seconds(1))).ok());

  EXPECT_THAT(scheduler_.Schedule(kT0), IsEmpty());
  EXPECT_FALSE(scheduler_.PlacementOf("job-gang").has_value());
  EXPECT_THAT(scheduler_.QueuedJobs(), ElementsAre("job-gang"));
  int leased = 0;
  for (const char* w : {"wrk-a", "wrk-b", "wrk-c"}) leased += scheduler_.LeasedSlots(w);
  EXPECT_EQ(leased, 1) << "the waiting gang must not hold any slot";

  ASSERT_TRUE(scheduler_.Remove("job-filler"));
  std::vector<Placement> placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].job_id, "job-gang");
  EXPECT_THAT(placed[0].rank_workers, ::testing::UnorderedElementsAre("wrk-a", "wrk-b", "wrk-c"));
  for (const char* w : {"wrk-a", "wrk-b", "wrk-c"}) EXPECT_EQ(scheduler_.LeasedSlots(w), 1);
  EXPECT_THAT(scheduler_.QueuedJobs(), IsEmpty());
}

TEST_F(SchedulerTest, HigherPriorityPlacedFirst) {
  Add(Worker("wrk-a", 2));
  ASSERT_TRUE(scheduler_.Submit(Job("job-low", 2, 0, absl::Seconds(0))).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-high", 2, 5, absl::Seconds(10))).ok());
  EXPECT_THAT(scheduler_.QueuedJobs(), ElementsAre("job-high", "job-low"));
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-high"));
  EXPECT_THAT(scheduler_.Schedule(kT0), IsEmpty());
  ASSERT_TRUE(scheduler_.Remove("job-high"));
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-low"));
}

TEST_F(SchedulerTest, FifoAmongEqualPriorityThenId) {
  Add(Worker("wrk-a", 1));
  ASSERT_TRUE(scheduler_.Submit(Job("job-late", 1, 1, absl::Seconds(20))).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-b", 1, 1, absl::Seconds(10))).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-a", 1, 1, absl::Seconds(10))).ok());
  EXPECT_THAT(scheduler_.QueuedJobs(), ElementsAre("job-a", "job-b", "job-late"));
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-a"));
  ASSERT_TRUE(scheduler_.Remove("job-a"));
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-b"));
  ASSERT_TRUE(scheduler_.Remove("job-b"));
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-late"));
}

TEST_F(SchedulerTest, SmallerJobBackfillsBehindOneThatDoesNotFit) {
  Add(Worker("wrk-a", 2));
  ASSERT_TRUE(scheduler_.Submit(Job("job-big", 3, 9)).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-small", 1, 0)).ok());
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-small"));
  EXPECT_THAT(scheduler_.QueuedJobs(), ElementsAre("job-big"));
}

TEST_F(SchedulerTest, SelectorMustBeSubsetOfLabels) {
  Add(Worker("wrk-onprem", 2, {{"pool", "onprem"}, {"zone", "a"}}));
  Add(Worker("wrk-cloud", 2, {{"pool", "cloud"}}));
  JobRequest cloud = Job("job-cloud", 2);
  cloud.selector = {{"pool", "cloud"}};
  JobRequest zoned = Job("job-zoned", 1, 0, absl::Seconds(1));
  zoned.selector = {{"pool", "cloud"}, {"zone", "a"}};
  JobRequest onprem = Job("job-onprem", 1, 0, absl::Seconds(2));
  onprem.selector = {{"zone", "a"}};
  for (const JobRequest& j : {cloud, zoned, onprem}) ASSERT_TRUE(scheduler_.Submit(j).ok());

  std::vector<Placement> placed = scheduler_.Schedule(kT0);
  ASSERT_THAT(PlacedIds(placed), ElementsAre("job-cloud", "job-onprem"));
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-cloud", "wrk-cloud"));
  EXPECT_THAT(placed[1].rank_workers, ElementsAre("wrk-onprem"));
  EXPECT_THAT(scheduler_.QueuedJobs(), ElementsAre("job-zoned"));
  EXPECT_EQ(scheduler_.WaitReason("job-zoned"),
            "no registered worker matches device CPU and pool=cloud, zone=a; it cannot run until "
            "one joins");
}

TEST_F(SchedulerTest, DeviceKindMustMatchAndUnspecifiedIsCpu) {
  Add(Worker("wrk-gpu", 1, {}, gantry::v1::DEVICE_KIND_GPU));
  Add(Worker("wrk-cpu", 1, {}, gantry::v1::DEVICE_KIND_UNSPECIFIED));
  JobRequest gpu = Job("job-gpu", 1);
  gpu.device = gantry::v1::DEVICE_KIND_GPU;
  JobRequest cpu = Job("job-cpu", 1, 0, absl::Seconds(1));
  cpu.device = gantry::v1::DEVICE_KIND_UNSPECIFIED;
  JobRequest gpu2 = Job("job-gpu2", 1, 0, absl::Seconds(2));
  gpu2.device = gantry::v1::DEVICE_KIND_GPU;
  for (const JobRequest& j : {gpu, cpu, gpu2}) ASSERT_TRUE(scheduler_.Submit(j).ok());
  std::vector<Placement> placed = scheduler_.Schedule(kT0);
  ASSERT_THAT(PlacedIds(placed), ElementsAre("job-gpu", "job-cpu"));
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-gpu"));
  EXPECT_THAT(placed[1].rank_workers, ElementsAre("wrk-cpu"));
  EXPECT_EQ(scheduler_.WaitReason("job-gpu2"),
            "waiting for 1 free slot matching device GPU (0 free)");
}

// A GPU worker's slots (one per GPU) take GPU ranks only and a CPU worker's slots CPU ranks only,
// however many slots of the other kind stand free.
TEST_F(SchedulerTest, GpuRanksLandOnlyOnGpuSlotsAndCpuRanksOnlyOnCpuWorkers) {
  Add(Worker("wrk-gpu", 2, {}, gantry::v1::DEVICE_KIND_GPU));
  Add(Worker("wrk-cpu", 2));
  auto job = [](const std::string& id, int world_size, gantry::v1::DeviceKind device, int order) {
    JobRequest j = Job(id, world_size, 0, absl::Seconds(order));
    j.device = device;
    return j;
  };
  const gantry::v1::DeviceKind cpu = gantry::v1::DEVICE_KIND_CPU;
  const gantry::v1::DeviceKind gpu = gantry::v1::DEVICE_KIND_GPU;
  for (const JobRequest& j :
       {job("job-cpu3", 3, cpu, 0), job("job-gpu1", 1, gpu, 1), job("job-cpu2", 2, cpu, 2),
        job("job-gpu2", 2, gpu, 3), job("job-cpu1", 1, cpu, 4)}) {
    ASSERT_TRUE(scheduler_.Submit(j).ok()) << j.id;
  }
  std::vector<Placement> placed = scheduler_.Schedule(kT0);
  ASSERT_THAT(PlacedIds(placed), ElementsAre("job-gpu1", "job-cpu2"));
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-gpu"));
  EXPECT_THAT(placed[1].rank_workers, ElementsAre("wrk-cpu", "wrk-cpu"));
  // One GPU slot stays free: neither the CPU rank nor the two-GPU gang takes it.
  EXPECT_EQ(scheduler_.FreeSlots("wrk-gpu"), 1);
  EXPECT_EQ(scheduler_.FreeSlots("wrk-cpu"), 0);
  EXPECT_THAT(scheduler_.QueuedJobs(), ElementsAre("job-cpu3", "job-gpu2", "job-cpu1"));
  EXPECT_THAT(scheduler_.WaitReason("job-cpu3"), HasSubstr("device CPU"));
  EXPECT_THAT(scheduler_.WaitReason("job-gpu2"), HasSubstr("device GPU"));
  EXPECT_EQ(scheduler_.WaitReason("job-cpu1"),
            "waiting for 1 free slot matching device CPU (0 free)");
  EXPECT_THAT(scheduler_.Schedule(kT0 + absl::Seconds(1)), IsEmpty());
}

TEST_F(SchedulerTest, PrefersWorkersCachingTheDataset) {
  WorkerState cached = Worker("wrk-b", 4);
  cached.cached_datasets = {"sha-x"};
  Add(Worker("wrk-a", 4));
  Add(cached);
  JobRequest with = Job("job-with", 2);
  with.dataset_key = "sha-x";
  ASSERT_TRUE(scheduler_.Submit(with).ok());
  std::vector<Placement> placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-b", "wrk-b"));

  // Without a dataset key: most free slots first (wrk-a has 4, wrk-b 2).
  ASSERT_TRUE(scheduler_.Submit(Job("job-without", 2, 0, absl::Seconds(1))).ok());
  placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-a", "wrk-a"));
}

TEST_F(SchedulerTest, CacheHeartbeatReplacesTheSetAndBeatsPacking) {
  Add(Worker("wrk-a", 4));
  Add(Worker("wrk-b", 1));
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-b", 1, {"sha-y"}, kT0).ok());
  JobRequest j = Job("job-1", 3);
  j.dataset_key = "sha-y";
  ASSERT_TRUE(scheduler_.Submit(j).ok());
  std::vector<Placement> placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  // The caching worker takes what it can; rank 0 goes where most ranks are.
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-a", "wrk-a", "wrk-b"));
  EXPECT_EQ(placed[0].rendezvous_host, "wrk-a.example");

  // The next heartbeat's set replaces the old one: wrk-b no longer caches sha-y.
  ASSERT_TRUE(scheduler_.Remove("job-1"));
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-b", 1, {"sha-z"}, kT0).ok());
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-a", 4, {}, kT0).ok());
  ASSERT_TRUE(scheduler_.Submit(JobRequest(j)).ok());
  placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-a", "wrk-a", "wrk-a"));
}

TEST_F(SchedulerTest, PacksOntoFewestWorkersRankZeroWithMostRanks) {
  Add(Worker("wrk-a", 1));
  Add(Worker("wrk-b", 4));
  Add(Worker("wrk-c", 2));
  Add(Worker("wrk-d", 2));
  ASSERT_TRUE(scheduler_.Submit(Job("job-4", 4)).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-3", 3, 0, absl::Seconds(1))).ok());
  std::vector<Placement> placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-b", "wrk-b", "wrk-b", "wrk-b"));
  EXPECT_EQ(placed[0].rendezvous_host, "wrk-b.example");
  // 2 free on wrk-c and wrk-d (tie broken by id), then 1 more from wrk-d.
  EXPECT_THAT(placed[1].rank_workers, ElementsAre("wrk-c", "wrk-c", "wrk-d"));
  EXPECT_EQ(placed[1].rendezvous_host, "wrk-c.example");
  EXPECT_EQ(scheduler_.FreeSlots("wrk-a"), 1);
  EXPECT_EQ(scheduler_.FreeSlots("wrk-d"), 1);
}

TEST_F(SchedulerTest, RendezvousPortsUniquePerWorkerAndReused) {
  WorkerState a = Worker("wrk-a", 3);
  a.port_min = 30000;
  a.port_max = 30001;
  WorkerState b = Worker("wrk-b", 1);
  b.port_min = 30000;
  b.port_max = 30000;
  Add(a);
  ASSERT_TRUE(scheduler_.Submit(Job("job-1", 1)).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-2", 1, 0, absl::Seconds(1))).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-3", 1, 0, absl::Seconds(2))).ok());
  std::vector<Placement> placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_EQ(placed[0].rendezvous_port, 30000);
  EXPECT_EQ(placed[1].rendezvous_port, 30001);
  EXPECT_THAT(scheduler_.QueuedJobs(), ElementsAre("job-3"));
  EXPECT_EQ(scheduler_.FreeSlots("wrk-a"), 1) << "a port-blocked job holds no slot";
  EXPECT_THAT(scheduler_.WaitReason("job-3"),
              HasSubstr("worker wrk-a has no free rendezvous port in 30000-30001"));

  // Another worker's range is its own: the same port number is fine there.
  Add(b);
  placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-b"));
  EXPECT_EQ(placed[0].rendezvous_port, 30000);

  // A released port is handed out again.
  ASSERT_TRUE(scheduler_.Remove("job-1"));
  ASSERT_TRUE(scheduler_.Submit(Job("job-4", 1, 0, absl::Seconds(3))).ok());
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-a", 2, {}, kT0).ok());
  placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].job_id, "job-4");
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-a"));
  EXPECT_EQ(placed[0].rendezvous_port, 30000);
}

TEST_F(SchedulerTest, LostWorkerReportedOnceAndAllLeasesOfItsJobsFreed) {
  Add(Worker("wrk-a", 1));
  Add(Worker("wrk-b", 1));
  Add(Worker("wrk-c", 1));
  ASSERT_TRUE(scheduler_.Submit(Job("job-pair", 2)).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-single", 1, 0, absl::Seconds(1))).ok());
  std::vector<Placement> placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 2u);
  ASSERT_THAT(placed[0].rank_workers, ElementsAre("wrk-a", "wrk-b"));
  ASSERT_THAT(placed[1].rank_workers, ElementsAre("wrk-c"));

  // wrk-a goes silent; wrk-b and wrk-c keep beating (busy).
  const absl::Time t10 = kT0 + absl::Seconds(10);
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-b", 0, {}, t10).ok());
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-c", 0, {}, t10).ok());
  EXPECT_THAT(scheduler_.ExpireLeases(kT0 + absl::Seconds(15)), IsEmpty()) << "15 s is not > 15 s";

  const absl::Time t16 = kT0 + absl::Seconds(16);
  std::vector<LostWorker> lost = scheduler_.ExpireLeases(t16);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].worker_id, "wrk-a");
  EXPECT_THAT(lost[0].job_ids, ElementsAre("job-pair"));
  EXPECT_FALSE(scheduler_.PlacementOf("job-pair").has_value());
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-a"), 0);
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-b"), 0) << "the lost job's lease elsewhere is released";
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-c"), 1);
  EXPECT_TRUE(scheduler_.PlacementOf("job-single").has_value());
  EXPECT_EQ(scheduler_.FreeSlots("wrk-a"), 0);
  EXPECT_THAT(scheduler_.ExpireLeases(t16 + absl::Seconds(1)), IsEmpty()) << "reported once";
  EXPECT_FALSE(scheduler_.Remove("job-pair")) << "a lost job is forgotten";

  // wrk-b's rank stopped; it reports its slot free. A new job goes there, not to the lost wrk-a.
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-b", 1, {}, t16).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-next", 1, 0, absl::Seconds(20))).ok());
  placed = scheduler_.Schedule(t16);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-b"));

  // wrk-a comes back with a heartbeat and is usable again.
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-a", 1, {}, t16).ok());
  EXPECT_EQ(scheduler_.FreeSlots("wrk-a"), 1);
  ASSERT_TRUE(scheduler_.Submit(Job("job-back", 1, 0, absl::Seconds(21))).ok());
  placed = scheduler_.Schedule(t16);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-a"));
}

TEST_F(SchedulerTest, LostWorkerWithoutJobsIsReportedToo) {
  Add(Worker("wrk-a", 1));
  std::vector<LostWorker> lost = scheduler_.ExpireLeases(kT0 + absl::Seconds(30));
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].worker_id, "wrk-a");
  EXPECT_THAT(lost[0].job_ids, IsEmpty());
  // Upsert (a re-registration) also brings it back.
  scheduler_.UpsertWorker(Worker("wrk-a", 1), kT0 + absl::Seconds(31));
  EXPECT_EQ(scheduler_.FreeSlots("wrk-a"), 1);
}

TEST_F(SchedulerTest, StaleWorkerIsNotUsedEvenBeforeExpiry) {
  Add(Worker("wrk-a", 1));
  ASSERT_TRUE(scheduler_.Submit(Job("job-1", 1)).ok());
  EXPECT_THAT(scheduler_.Schedule(kT0 + absl::Seconds(20)), IsEmpty());
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0 + absl::Seconds(15))), ElementsAre("job-1"));
}

TEST_F(SchedulerTest, DisconnectedWorkerKeepsLeasesButTakesNoNewRanks) {
  Add(Worker("wrk-a", 2));
  ASSERT_TRUE(scheduler_.Submit(Job("job-1", 1)).ok());
  ASSERT_EQ(scheduler_.Schedule(kT0).size(), 1u);
  scheduler_.MarkDisconnected("wrk-a");
  scheduler_.MarkDisconnected("wrk-unknown");  // ignored
  ASSERT_TRUE(scheduler_.Submit(Job("job-2", 1, 0, absl::Seconds(1))).ok());
  EXPECT_THAT(scheduler_.Schedule(kT0), IsEmpty());
  EXPECT_EQ(scheduler_.FreeSlots("wrk-a"), 0);
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-a"), 1);
  EXPECT_TRUE(scheduler_.PlacementOf("job-1").has_value());
  EXPECT_THAT(scheduler_.WaitReason("job-2"),
              HasSubstr("1 matching worker is disconnected or lost"));

  // Reconnect (register again) and beat: placements resume, the old lease is still counted.
  scheduler_.UpsertWorker(Worker("wrk-a", 2), kT0 + absl::Seconds(2));
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-a", 1, {}, kT0 + absl::Seconds(2)).ok());
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0 + absl::Seconds(2))), ElementsAre("job-2"));
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-a"), 2);
}

// Without reservations: with them, job-3 would reserve wrk-a and the single-rank jobs would wait.
TEST_F(SchedulerWithoutReservationsTest, ReportedFreeSlotsBoundPlacementUntilTheNextHeartbeat) {
  Add(Worker("wrk-a", 4));
  // Two ranks the scheduler does not know of (e.g. from before a server restart).
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-a", 2, {}, kT0).ok());
  EXPECT_EQ(scheduler_.FreeSlots("wrk-a"), 2);
  ASSERT_TRUE(scheduler_.Submit(Job("job-3", 3)).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-1a", 1, 0, absl::Seconds(1))).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-1b", 1, 0, absl::Seconds(2))).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-1c", 1, 0, absl::Seconds(3))).ok());
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0)), ElementsAre("job-1a", "job-1b"));
  // The report predates those placements: still nothing more until the worker reports again.
  EXPECT_EQ(scheduler_.FreeSlots("wrk-a"), 0);
  EXPECT_THAT(scheduler_.Schedule(kT0), IsEmpty());
  // The unknown ranks ended: the worker reports 2 free (4 - our 2).
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-a", 2, {}, kT0 + absl::Seconds(1)).ok());
  EXPECT_THAT(PlacedIds(scheduler_.Schedule(kT0 + absl::Seconds(1))), ElementsAre("job-1c"));
  EXPECT_EQ(scheduler_.WaitReason("job-3"),
            "waiting for 3 free slots matching device CPU (1 free)");
}

TEST_F(SchedulerTest, HeartbeatFromUnknownWorkerIsNotFound) {
  absl::Status s = scheduler_.Heartbeat("wrk-nobody", 1, {}, kT0);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("wrk-nobody"));
  EXPECT_EQ(scheduler_.FreeSlots("wrk-nobody"), 0);
}

TEST_F(SchedulerTest, SubmitValidatesAndIsIdempotent) {
  EXPECT_EQ(scheduler_.Submit(Job("job-zero", 0)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_.Submit(Job("", 1)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(scheduler_.QueuedJobs(), IsEmpty());

  Add(Worker("wrk-a", 1));
  ASSERT_TRUE(scheduler_.Submit(Job("job-1", 1)).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-1", 1, 7)).ok());
  EXPECT_THAT(scheduler_.QueuedJobs(), ElementsAre("job-1"));
  ASSERT_EQ(scheduler_.Schedule(kT0).size(), 1u);
  ASSERT_TRUE(scheduler_.Submit(Job("job-1", 1)).ok());
  EXPECT_THAT(scheduler_.QueuedJobs(), IsEmpty()) << "a placed job is left alone";
  EXPECT_TRUE(scheduler_.PlacementOf("job-1").has_value());
}

TEST_F(SchedulerTest, RemoveQueuedPlacedAndUnknown) {
  Add(Worker("wrk-a", 1));
  ASSERT_TRUE(scheduler_.Submit(Job("job-1", 1)).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-2", 1, 0, absl::Seconds(1))).ok());
  ASSERT_EQ(scheduler_.Schedule(kT0).size(), 1u);
  EXPECT_TRUE(scheduler_.Remove("job-2"));
  EXPECT_THAT(scheduler_.QueuedJobs(), IsEmpty());
  EXPECT_TRUE(scheduler_.Remove("job-1"));
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-a"), 0);
  EXPECT_FALSE(scheduler_.Remove("job-1"));
  EXPECT_FALSE(scheduler_.Remove("job-never"));
}

TEST_F(SchedulerTest, AdoptRecreatesLeasesAndRejectsConflicts) {
  Add(Worker("wrk-a", 4));
  Add(Worker("wrk-b", 2));
  Placement running{"job-run", {"wrk-a", "wrk-a", "wrk-b"}, "wrk-a.example", 29400};
  ASSERT_TRUE(scheduler_.Adopt(running).ok());
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-a"), 2);
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-b"), 1);
  EXPECT_TRUE(scheduler_.Adopt(running).ok()) << "adopting the same placement again is a no-op";
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-a"), 2);
  std::optional<Placement> held = scheduler_.PlacementOf("job-run");
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->rank_workers, running.rank_workers);
  EXPECT_EQ(held->rendezvous_port, 29400);

  Placement too_big{"job-big", {"wrk-b", "wrk-b"}, "wrk-b.example", 29400};
  EXPECT_EQ(scheduler_.Adopt(too_big).code(), absl::StatusCode::kFailedPrecondition);
  Placement port_taken{"job-port", {"wrk-a"}, "wrk-a.example", 29400};
  EXPECT_EQ(scheduler_.Adopt(port_taken).code(), absl::StatusCode::kFailedPrecondition);
  Placement unknown{"job-unknown", {"wrk-zzz"}, "wrk-zzz.example", 29400};
  EXPECT_EQ(scheduler_.Adopt(unknown).code(), absl::StatusCode::kFailedPrecondition);
  Placement moved{"job-run", {"wrk-b"}, "wrk-b.example", 29400};
  EXPECT_EQ(scheduler_.Adopt(moved).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(scheduler_.Adopt(Placement{"job-empty", {}, "", 0}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-b"), 1) << "failed adoptions lease nothing";

  // A queued job that turns out to be running leaves the queue when adopted.
  ASSERT_TRUE(scheduler_.Submit(Job("job-queued", 1)).ok());
  ASSERT_TRUE(scheduler_.Adopt(Placement{"job-queued", {"wrk-a"}, "wrk-a.example", 29401}).ok());
  EXPECT_THAT(scheduler_.QueuedJobs(), IsEmpty());

  // New placements avoid adopted slots and ports.
  ASSERT_TRUE(scheduler_.Submit(Job("job-new", 1)).ok());
  std::vector<Placement> placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-a"));
  EXPECT_EQ(placed[0].rendezvous_port, 29402);
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-a"), 4);

  // Removing an adopted job releases its leases.
  EXPECT_TRUE(scheduler_.Remove("job-run"));
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-a"), 2);
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-b"), 0);
}

TEST_F(SchedulerTest, WaitReasonTexts) {
  Add(Worker("wrk-a", 1, {{"pool", "onprem"}}));
  Add(Worker("wrk-b", 1, {{"pool", "onprem"}}));
  JobRequest hold = Job("job-hold", 1);
  hold.selector = {{"pool", "onprem"}};
  ASSERT_TRUE(scheduler_.Submit(hold).ok());
  ASSERT_EQ(scheduler_.Schedule(kT0).size(), 1u);

  JobRequest two = Job("job-two", 2, 0, absl::Seconds(1));
  two.selector = {{"pool", "onprem"}};
  JobRequest three = Job("job-three", 3, 0, absl::Seconds(2));
  three.selector = {{"pool", "onprem"}};
  JobRequest gpu = Job("job-gpu", 1, 0, absl::Seconds(3));
  gpu.selector = {{"pool", "gpu"}};
  for (const JobRequest& j : {two, three, gpu}) ASSERT_TRUE(scheduler_.Submit(j).ok());
  EXPECT_THAT(scheduler_.Schedule(kT0), IsEmpty());

  EXPECT_EQ(scheduler_.WaitReason("job-two"),
            "waiting for 2 free slots matching device CPU and pool=onprem (1 free); 2 workers are "
            "reserved for it, so smaller jobs do not take their slots as they free up");
  EXPECT_EQ(scheduler_.WaitReason("job-three"),
            "needs 3 slots matching device CPU and pool=onprem but the connected matching "
            "workers have 2 in total; it cannot run until more join");
  EXPECT_EQ(scheduler_.WaitReason("job-gpu"),
            "no registered worker matches device CPU and pool=gpu; it cannot run until one joins");
  EXPECT_EQ(scheduler_.WaitReason("job-hold"), "") << "placed";
  EXPECT_EQ(scheduler_.WaitReason("job-nobody"), "") << "unknown";

  // Before a round, a job that fits says so.
  ASSERT_TRUE(scheduler_.Remove("job-hold"));
  EXPECT_EQ(scheduler_.WaitReason("job-two"),
            "2 free slots match device CPU and pool=onprem; it is placed at the next scheduling "
            "round");
}

}  // namespace

// A restart: the coordinator releases a placed job (Remove) and submits it again. The gang goes
// to workers whose slots are really free: not to the one still reporting the old rank busy, and
// the lost worker is never used.
TEST_F(SchedulerTest, RestartedJobIsPlacedAgainOnlyOnReallyFreeSlots) {
  Add(Worker("wrk-a", 1));
  Add(Worker("wrk-b", 1));
  Add(Worker("wrk-c", 1));
  ASSERT_TRUE(scheduler_.Submit(Job("job-pair", 2)).ok());
  std::vector<Placement> placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  ASSERT_THAT(placed[0].rank_workers, ElementsAre("wrk-a", "wrk-b"));

  // wrk-b is lost; wrk-a's old rank is still being stopped (its heartbeat says 0 free).
  const absl::Time t10 = kT0 + absl::Seconds(10);
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-a", 0, {}, t10).ok());
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-c", 1, {}, t10).ok());
  const absl::Time t16 = kT0 + absl::Seconds(16);
  std::vector<LostWorker> lost = scheduler_.ExpireLeases(t16);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_THAT(lost[0].job_ids, ElementsAre("job-pair"));

  EXPECT_FALSE(scheduler_.Remove("job-pair")) << "already forgotten by the expiry";
  ASSERT_TRUE(scheduler_.Submit(Job("job-pair", 2)).ok());
  EXPECT_THAT(scheduler_.Schedule(t16), IsEmpty()) << "wrk-a still reports its slot busy";
  EXPECT_THAT(scheduler_.WaitReason("job-pair"), HasSubstr("waiting for 2 free slots"));

  // The old rank exited: wrk-a reports its slot free; the gang is wrk-a + wrk-c, never wrk-b.
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-a", 1, {}, t16).ok());
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-c", 1, {}, t16).ok());
  placed = scheduler_.Schedule(t16);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_THAT(placed[0].rank_workers, UnorderedElementsAre("wrk-a", "wrk-c"));
}

TEST_F(SchedulerTest, DrainingWorkerTakesNoNewRanksUntilUndrained) {
  Add(Worker("wrk-a", 2));
  Add(Worker("wrk-b", 1));
  ASSERT_TRUE(scheduler_.Submit(Job("job-one", 1)).ok());
  std::vector<Placement> placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  ASSERT_THAT(placed[0].rank_workers, ElementsAre("wrk-a"));

  EXPECT_FALSE(scheduler_.SetDraining("wrk-unknown", true));
  ASSERT_TRUE(scheduler_.SetDraining("wrk-a", true));
  EXPECT_EQ(scheduler_.LeasedSlots("wrk-a"), 1) << "draining keeps the running job's lease";
  ASSERT_TRUE(scheduler_.Submit(Job("job-two", 2, 0, absl::Seconds(1))).ok());
  ASSERT_TRUE(scheduler_.Submit(Job("job-small", 1, 0, absl::Seconds(2))).ok());
  // A heartbeat (or a reconnect) does not undrain.
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-a", 1, {}, kT0).ok());
  scheduler_.UpsertWorker(Worker("wrk-a", 2), kT0);
  placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].job_id, "job-small");
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-b"));
  EXPECT_THAT(scheduler_.WaitReason("job-two"), HasSubstr("1 matching worker is draining"));

  ASSERT_TRUE(scheduler_.SetDraining("wrk-a", false));
  ASSERT_TRUE(scheduler_.Remove("job-one"));
  ASSERT_TRUE(scheduler_.Heartbeat("wrk-a", 2, {}, kT0).ok());
  placed = scheduler_.Schedule(kT0);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].job_id, "job-two");
  EXPECT_THAT(placed[0].rank_workers, ElementsAre("wrk-a", "wrk-a"));
}

}  // namespace gantry::scheduler
