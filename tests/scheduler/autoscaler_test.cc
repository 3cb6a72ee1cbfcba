// The pure Autoscaler and ChoosePool: gangs, min/max, backoff, scale to zero, never a busy worker,
// cheapest eligible pool; with an injected clock and up to thousands of fake workers.
#include "scheduler/autoscaler.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "scheduler/pool_choice.h"

namespace gantry::scheduler {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1800000000);

PoolConfig Elastic(const std::string& name, int min, int max, int slots = 1, double price = 1) {
  PoolConfig p;
  p.name = name;
  p.min_workers = min;
  p.max_workers = max;
  p.slots_per_worker = slots;
  p.price_per_device_hour = price;
  p.elastic = true;
  return p;
}

PoolWorker Worker(const std::string& id, const std::string& pool, int slots, int busy,
                  absl::Duration idle_for = absl::ZeroDuration()) {
  PoolWorker w;
  w.id = id;
  w.pool = pool;
  w.slots = slots;
  w.busy_slots = busy;
  w.idle_since = kNow - idle_for;
  return w;
}

Autoscaler Scaler(absl::Duration idle = absl::Seconds(60)) {
  return Autoscaler(AutoscalerOptions{idle});
}

TEST(AutoscalerTest, EmptyPoolGrowsByWholeGang) {
  const AutoscalePlan plan =
      Scaler().Plan({Elastic("hpc", 0, 4)}, {}, {{"job-a", "hpc", 2}}, {}, kNow);
  ASSERT_EQ(plan.scale_ups.size(), 1u);
  EXPECT_EQ(plan.scale_ups[0].pool, "hpc");
  EXPECT_EQ(plan.scale_ups[0].count, 2);
  EXPECT_EQ(plan.scale_ups[0].job_ids, std::vector<std::string>{"job-a"});
  EXPECT_TRUE(plan.scale_downs.empty());
}

TEST(AutoscalerTest, SlotsPerWorkerRoundsUp) {
  const AutoscalePlan plan =
      Scaler().Plan({Elastic("hpc", 0, 10, 4)}, {}, {{"job-a", "hpc", 5}}, {}, kNow);
  ASSERT_EQ(plan.scale_ups.size(), 1u);
  EXPECT_EQ(plan.scale_ups[0].count, 2);  // 8 slots for 5 ranks
}

TEST(AutoscalerTest, NeverHalfAGang) {
  // One worker free already, max 2: a gang of 4 needs 3 more, which would exceed max.
  const AutoscalePlan plan =
      Scaler().Plan({Elastic("hpc", 0, 2)}, {Worker("w1", "hpc", 1, 0)},
                    {{"job-big", "hpc", 4}, {"job-small", "hpc", 2}}, {}, kNow);
  ASSERT_EQ(plan.scale_ups.size(), 1u);
  EXPECT_EQ(plan.scale_ups[0].count, 1);  // only the small gang: 1 free + 1 new
  EXPECT_EQ(plan.scale_ups[0].job_ids, std::vector<std::string>{"job-small"});
  ASSERT_TRUE(plan.job_notes.count("job-big"));
  EXPECT_NE(plan.job_notes.at("job-big").find("max_workers is 2"), std::string::npos)
      << plan.job_notes.at("job-big");
}

TEST(AutoscalerTest, PendingWorkersAreCountedBeforeNewOnes) {
  std::map<std::string, PoolProvisioning> prov;
  prov["hpc"].pending_workers = 2;
  const AutoscalePlan plan = Scaler().Plan({Elastic("hpc", 0, 8)}, {},
                                           {{"job-a", "hpc", 2}, {"job-b", "hpc", 1}}, prov, kNow);
  ASSERT_EQ(plan.scale_ups.size(), 1u);
  EXPECT_EQ(plan.scale_ups[0].count, 1);  // job-a takes the two pending, job-b one more
  EXPECT_EQ(plan.scale_ups[0].job_ids, std::vector<std::string>{"job-b"});
}

TEST(AutoscalerTest, FreeSlotsServeTheJobWithoutScaling) {
  const AutoscalePlan plan =
      Scaler().Plan({Elastic("hpc", 0, 8)}, {Worker("w1", "hpc", 2, 0), Worker("w2", "hpc", 2, 1)},
                    {{"job-a", "hpc", 3}}, {}, kNow);
  EXPECT_TRUE(plan.scale_ups.empty());
  EXPECT_TRUE(plan.scale_downs.empty());
}

TEST(AutoscalerTest, MinWorkersAreKept) {
  const AutoscalePlan plan =
      Scaler().Plan({Elastic("hpc", 3, 8)}, {Worker("w1", "hpc", 1, 0)}, {}, {}, kNow);
  ASSERT_EQ(plan.scale_ups.size(), 1u);
  EXPECT_EQ(plan.scale_ups[0].count, 2);
  EXPECT_TRUE(plan.scale_ups[0].job_ids.empty());
}

TEST(AutoscalerTest, BackoffAndInFlightHoldScaleUpWithAReason) {
  std::map<std::string, PoolProvisioning> prov;
  prov["hpc"].backoff_until = kNow + absl::Seconds(30);
  prov["hpc"].last_error = "Slurm: sbatch exited with code 1: Unable to contact slurm controller";
  AutoscalePlan plan = Scaler().Plan({Elastic("hpc", 1, 8)}, {}, {{"job-a", "hpc", 2}}, prov, kNow);
  EXPECT_TRUE(plan.scale_ups.empty());  // not even for min_workers
  ASSERT_TRUE(plan.job_notes.count("job-a"));
  EXPECT_NE(plan.job_notes.at("job-a").find("Unable to contact slurm controller"),
            std::string::npos);
  // After the backoff it tries again.
  plan = Scaler().Plan({Elastic("hpc", 1, 8)}, {}, {{"job-a", "hpc", 2}}, prov,
                       kNow + absl::Seconds(31));
  ASSERT_EQ(plan.scale_ups.size(), 1u);
  EXPECT_EQ(plan.scale_ups[0].count, 2);

  prov["hpc"] = PoolProvisioning();
  prov["hpc"].call_in_flight = true;
  plan = Scaler().Plan({Elastic("hpc", 0, 8)}, {}, {{"job-a", "hpc", 2}}, prov, kNow);
  EXPECT_TRUE(plan.scale_ups.empty());
  EXPECT_NE(plan.job_notes.at("job-a").find("being scaled up"), std::string::npos);
}

TEST(AutoscalerTest, ScalesIdleWorkersToZeroButNeverBusyOnes) {
  const AutoscalePlan plan = Scaler(absl::Seconds(60))
                                 .Plan({Elastic("hpc", 0, 8)},
                                       {Worker("w-idle-old", "hpc", 1, 0, absl::Seconds(300)),
                                        Worker("w-idle-new", "hpc", 1, 0, absl::Seconds(10)),
                                        Worker("w-busy", "hpc", 1, 1, absl::Seconds(600))},
                                       {}, {}, kNow);
  ASSERT_EQ(plan.scale_downs.size(), 1u);
  EXPECT_EQ(plan.scale_downs[0].worker_ids, std::vector<std::string>{"w-idle-old"});
}

TEST(AutoscalerTest, ScaleDownStopsAtMinAndOldestIdleGoFirst) {
  const AutoscalePlan plan = Scaler(absl::Seconds(60))
                                 .Plan({Elastic("hpc", 1, 8)},
                                       {Worker("w-a", "hpc", 1, 0, absl::Seconds(100)),
                                        Worker("w-b", "hpc", 1, 0, absl::Seconds(900)),
                                        Worker("w-c", "hpc", 1, 0, absl::Seconds(500))},
                                       {}, {}, kNow);
  ASSERT_EQ(plan.scale_downs.size(), 1u);
  EXPECT_EQ(plan.scale_downs[0].worker_ids, (std::vector<std::string>{"w-b", "w-c"}));
}

TEST(AutoscalerTest, NoScaleDownWhileJobsWaitOrWorkersArePending) {
  std::map<std::string, PoolProvisioning> prov;
  AutoscalePlan plan =
      Scaler().Plan({Elastic("hpc", 0, 1)}, {Worker("w-a", "hpc", 1, 0, absl::Hours(1))},
                    {{"job-big", "hpc", 4}}, prov, kNow);
  EXPECT_TRUE(plan.scale_downs.empty());
  prov["hpc"].pending_workers = 1;
  plan = Scaler().Plan({Elastic("hpc", 0, 4)}, {Worker("w-a", "hpc", 1, 0, absl::Hours(1))}, {},
                       prov, kNow);
  EXPECT_TRUE(plan.scale_downs.empty());
}

TEST(AutoscalerTest, StaticPoolsAreNeverScaled) {
  PoolConfig fixed = Elastic("onprem", 2, 4);
  fixed.elastic = false;
  const AutoscalePlan plan = Scaler().Plan({fixed}, {Worker("w-a", "onprem", 1, 0, absl::Hours(1))},
                                           {{"job-a", "onprem", 3}}, {}, kNow);
  EXPECT_TRUE(plan.scale_ups.empty());
  EXPECT_TRUE(plan.scale_downs.empty());
  EXPECT_EQ(plan.waiting_jobs.at("onprem"), 1);
}

TEST(AutoscalerTest, ThousandsOfWorkersAndJobs) {
  std::vector<PoolConfig> pools;
  std::vector<PoolWorker> workers;
  std::vector<PoolJob> jobs;
  for (int p = 0; p < 5; ++p) pools.push_back(Elastic(absl::StrCat("p", p), 0, 400, 2));
  for (int i = 0; i < 1000; ++i) {
    // Pool p has 200 workers, half of them busy; the idle ones idle for 2 minutes.
    workers.push_back(Worker(absl::StrCat("w", i), absl::StrCat("p", i % 5), 2, (i / 5) % 2 ? 2 : 0,
                             absl::Minutes(2)));
  }
  for (int j = 0; j < 2000; ++j) jobs.push_back({absl::StrCat("job", j), "p0", 1 + j % 4});
  const AutoscalePlan plan = Scaler().Plan(pools, workers, jobs, {}, kNow);
  // p0: 100 idle workers x 2 slots = 200 free; the gangs of 1..4 ranks, taken in order, use them,
  // then grow p0 up to max 400 workers (200 more), never beyond.
  ASSERT_EQ(plan.scale_ups.size(), 1u);
  EXPECT_EQ(plan.scale_ups[0].pool, "p0");
  EXPECT_EQ(plan.scale_ups[0].count, 200);
  // The other pools have no waiting job: their idle workers go (min 0).
  ASSERT_EQ(plan.scale_downs.size(), 4u);
  for (const ScaleDown& d : plan.scale_downs) EXPECT_EQ(d.worker_ids.size(), 100u) << d.pool;
}

TEST(ChoosePoolTest, NoPoolsMeansNoConstraint) {
  EXPECT_EQ(*ChoosePool({}, PoolRequirements{}), "");
}

TEST(ChoosePoolTest, CheapestEligiblePoolWins) {
  PoolConfig cheap = Elastic("spot", 0, 8, 1, 0.3);
  cheap.preemptible = true;
  PoolConfig mid = Elastic("hpc", 0, 8, 1, 0.8);
  PoolConfig dear = Elastic("cloud", 0, 8, 1, 2.5);
  PoolConfig gpu = Elastic("gpu", 0, 8, 1, 0.1);
  gpu.device = gantry::v1::DEVICE_KIND_GPU;
  PoolConfig small = Elastic("tiny", 0, 1, 1, 0.05);
  std::vector<PoolConfig> pools = {cheap, mid, dear, gpu, small};
  PoolRequirements job;
  job.world_size = 2;
  EXPECT_EQ(*ChoosePool(pools, job), "hpc");  // spot not allowed, gpu other device, tiny too small
  job.allow_preemptible = true;
  EXPECT_EQ(*ChoosePool(pools, job), "spot");
  job.device = gantry::v1::DEVICE_KIND_GPU;
  EXPECT_EQ(*ChoosePool(pools, job), "gpu");
}

TEST(ChoosePoolTest, SelectorLabelsMustMatchThePoolsLabels) {
  PoolConfig a = Elastic("a", 0, 8, 1, 1);
  a.labels["zone"] = "east";
  PoolConfig b = Elastic("b", 0, 8, 1, 2);
  b.labels["zone"] = "west";
  PoolRequirements job;
  job.selector["zone"] = "west";
  EXPECT_EQ(*ChoosePool({a, b}, job), "b");
  job.selector["zone"] = "north";
  EXPECT_EQ(*ChoosePool({a, b}, job), "");  // none eligible: waits for any matching worker
}

TEST(ChoosePoolTest, NamedPoolErrorsSayWhatToChange) {
  std::vector<PoolConfig> pools = {Elastic("hpc", 0, 2), Elastic("cloud", 0, 8)};
  PoolRequirements job;
  job.pool = "nope";
  absl::StatusOr<std::string> r = ChoosePool(pools, job);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no pool is named \"nope\"; defined pools: hpc, cloud"),
            std::string::npos)
      << r.status();
  job.pool = "hpc";
  job.world_size = 3;
  r = ChoosePool(pools, job);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("fewer than world_size 3"), std::string::npos);
  job.world_size = 1;
  job.device = gantry::v1::DEVICE_KIND_GPU;
  r = ChoosePool(pools, job);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(),
            "spec.pool: pool hpc has CPU workers only and can never run the job's GPU ranks; name "
            "a GPU pool, leave the pool out, or change spec.resources_per_rank.device");
  job.device = gantry::v1::DEVICE_KIND_CPU;
  job.selector["pool"] = "cloud";
  EXPECT_EQ(ChoosePool(pools, job).status().code(), absl::StatusCode::kInvalidArgument);
  job.pool = "";
  EXPECT_EQ(*ChoosePool(pools, job), "cloud");  // the selector names it
}

// A pool declares its workers' device: a job of the other device naming it (by spec.pool or by
// its selector) could never start there.
TEST(ChoosePoolTest, ANamedPoolOfTheOtherDeviceIsAFailedPrecondition) {
  PoolConfig gpus = Elastic("gpus", 0, 4);
  gpus.device = gantry::v1::DEVICE_KIND_GPU;
  const std::vector<PoolConfig> pools = {gpus, Elastic("cpus", 0, 4)};
  PoolRequirements job;
  job.device = gantry::v1::DEVICE_KIND_UNSPECIFIED;  // = CPU
  job.selector["pool"] = "gpus";
  absl::StatusOr<std::string> r = ChoosePool(pools, job);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("pool gpus has GPU workers only"), std::string::npos)
      << r.status();
  job.selector.clear();
  job.pool = "cpus";
  job.device = gantry::v1::DEVICE_KIND_GPU;
  EXPECT_EQ(ChoosePool(pools, job).status().code(), absl::StatusCode::kFailedPrecondition);
  job.pool = "gpus";
  EXPECT_EQ(*ChoosePool(pools, job), "gpus");
  // Unnamed: a GPU job is given the GPU pool.
  job.pool = "";
  EXPECT_EQ(*ChoosePool(pools, job), "gpus");
}

}  // namespace
}  // namespace gantry::scheduler
