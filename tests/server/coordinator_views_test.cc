// What the coordinator shows to the pools and /metrics (CoordinatorState's PoolControl
// operations), in process on a real scheduler: the snapshot's copy of each worker, which workers
// a scale-down may retire, that an operator's drain survives a failed removal, and the pool notes.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "server/coordinator/coordinator_state.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

class CoordinatorViewsTest : public ::testing::Test {
 protected:
  CoordinatorViewsTest() : state_(scheduler::SchedulerOptions{}) {}

  // A registered worker of `slots` slots in `pool`, connected to this server.
  void Join(const std::string& id, const std::string& pool, int slots) {
    absl::MutexLock lock(&state_.mu);
    v1::RegisterRequest request;
    request.set_name("name-" + id);
    request.set_slots(slots);
    request.set_device(v1::DEVICE_KIND_CPU);
    (*request.mutable_labels())["pool"] = pool;
    (*request.mutable_labels())["host"] = id;
    state_.registered[id] = request;
    scheduler::WorkerState worker;
    worker.id = id;
    worker.name = request.name();
    worker.slots = slots;
    worker.labels = {{"pool", pool}, {"host", id}};
    state_.scheduler.UpsertWorker(worker, kStart);
    state_.links[id] = std::make_shared<WorkerLink>(id);
  }
  // Its latest heartbeat lists `ranks` running ranks.
  void Report(const std::string& id, int ranks) {
    absl::MutexLock lock(&state_.mu);
    WorkerReport& report = state_.reports[id];
    report.heartbeat.clear_running_ranks();
    for (int r = 0; r < ranks; ++r) report.heartbeat.add_running_ranks()->set_rank(r);
  }
  // A job of `world_size` ranks in `pool`, queued and then placed when `place`.
  void Queue(const std::string& job, const std::string& pool, int world_size, bool place) {
    absl::MutexLock lock(&state_.mu);
    scheduler::JobRequest request;
    request.id = job;
    request.world_size = world_size;
    request.submitted = kStart;
    request.selector = {{"pool", pool}};
    ASSERT_TRUE(state_.scheduler.Submit(request).ok());
    state_.queued.insert(job);
    if (place) {
      ASSERT_EQ(state_.scheduler.Schedule(kStart).size(), 1u) << job;
      state_.queued.erase(job);
    }
  }
  const WorkerView& Find(const CoordinatorSnapshot& snapshot, const std::string& id) {
    auto it = std::find_if(snapshot.workers.begin(), snapshot.workers.end(),
                           [&](const WorkerView& w) { return w.id == id; });
    EXPECT_NE(it, snapshot.workers.end()) << id;
    return *it;
  }
  // Drained by an operator (as WorkerSessions::SetDrain does it).
  void Drain(const std::string& id) {
    absl::MutexLock lock(&state_.mu);
    state_.drained.insert(id);
    state_.scheduler.SetDraining(id, true);
  }
  // Whether the scheduler places a one-rank job on worker `id` now (the probe is removed again).
  bool Placeable(const std::string& id) {
    absl::MutexLock lock(&state_.mu);
    scheduler::JobRequest probe;
    probe.id = "probe-" + id;
    probe.submitted = kStart;
    probe.selector = {{"host", id}};
    EXPECT_TRUE(state_.scheduler.Submit(probe).ok());
    const bool placed = !state_.scheduler.Schedule(kStart).empty();
    state_.scheduler.Remove(probe.id);
    return placed;
  }

  CoordinatorState state_;
};

TEST_F(CoordinatorViewsTest, TheSnapshotCopiesEachWorkersSlotsRanksAndConnection) {
  Join("w1", "hpc", 4);
  Join("w2", "hpc", 2);
  Join("w3", "cloud", 1);
  Queue("job-a", "hpc", 3, /*place=*/true);
  Queue("job-b", "cloud", 2, /*place=*/false);
  Report("w2", 1);
  {
    absl::MutexLock lock(&state_.mu);
    state_.links.erase("w3");
    state_.scheduler.MarkDisconnected("w3");
  }
  Drain("w2");

  const CoordinatorSnapshot snapshot = state_.Snapshot();
  ASSERT_EQ(snapshot.workers.size(), 3u);
  const WorkerView& w1 = Find(snapshot, "w1");
  EXPECT_EQ(w1.name, "name-w1");
  EXPECT_EQ(w1.labels.at("pool"), "hpc");
  EXPECT_EQ(w1.device, v1::DEVICE_KIND_CPU);
  EXPECT_EQ(w1.slots, 4);
  EXPECT_EQ(w1.leased_slots, 3) << "the gang packs onto the larger worker";
  EXPECT_EQ(w1.free_slots, 1);
  EXPECT_TRUE(w1.connected && w1.live && !w1.draining);
  const WorkerView& w2 = Find(snapshot, "w2");
  EXPECT_EQ(w2.leased_slots, 0);
  EXPECT_EQ(w2.running_ranks, 1) << "from its heartbeat";
  EXPECT_TRUE(w2.draining);
  const WorkerView& w3 = Find(snapshot, "w3");
  EXPECT_FALSE(w3.connected);
  EXPECT_FALSE(w3.live);
  EXPECT_EQ(w3.free_slots, 0);
  EXPECT_EQ(w3.leased_slots, 0);
  EXPECT_EQ(w3.running_ranks, 0);
  ASSERT_EQ(snapshot.demand.size(), 1u);
  EXPECT_EQ(snapshot.demand[0].id, "job-b");
  EXPECT_EQ(snapshot.queued_jobs, 1);
}

TEST_F(CoordinatorViewsTest, OnlyIdleWorkersNotDrainedAreRetiredAndThenTakeNoPlacement) {
  Join("busy", "hpc", 2);
  Join("running", "hpc", 2);
  Join("drained", "hpc", 2);
  Join("idle", "hpc", 2);
  Queue("job-a", "hpc", 2, /*place=*/true);  // on "busy", first by id among equals
  Report("running", 1);
  Drain("drained");

  const std::vector<std::string> retired =
      state_.RetireIdle({"busy", "running", "drained", "idle", "gone"});
  EXPECT_EQ(retired, (std::vector<std::string>{"idle", "gone"}))
      << "a worker unknown since the snapshot loses nothing by its removal";
  EXPECT_FALSE(Placeable("idle")) << "retired: nothing is placed on it before its removal";
  EXPECT_TRUE(Placeable("running")) << "left in service";
  EXPECT_FALSE(Placeable("drained"));
  EXPECT_FALSE(Find(state_.Snapshot(), "idle").draining)
      << "a retirement is not an operator's drain";
}

TEST_F(CoordinatorViewsTest, AFailedRemovalReturnsWorkersToServiceButKeepsAnOperatorsDrain) {
  Join("a", "hpc", 1);
  Join("b", "hpc", 1);
  ASSERT_EQ(state_.RetireIdle({"a", "b"}).size(), 2u);
  Drain("b");  // by an operator, meanwhile
  state_.Unretire({"a", "b"});
  EXPECT_TRUE(Placeable("a"));
  EXPECT_FALSE(Placeable("b"));
}

TEST_F(CoordinatorViewsTest, PoolNotesAreReplacedForConsideredJobsAndDroppedOnceNotQueued) {
  Join("w", "hpc", 1);
  Queue("job-a", "hpc", 4, /*place=*/false);
  Queue("job-b", "hpc", 4, /*place=*/false);
  state_.SetPoolNotes({"job-a", "job-b"}, {{"job-a", "pool hpc cannot scale up: quota"},
                                           {"job-b", "waiting for 3 pending workers"}});
  {
    absl::MutexLock lock(&state_.mu);
    EXPECT_EQ(state_.pool_notes.size(), 2u);
    state_.queued.erase("job-b");  // placed or cancelled
  }
  state_.SetPoolNotes({"job-a"}, {});
  absl::MutexLock lock(&state_.mu);
  EXPECT_TRUE(state_.pool_notes.empty())
      << "job-a's note was replaced by none, job-b's left with the queue";
}

TEST_F(CoordinatorViewsTest, ANoteOfAJobNotConsideredThisPassStaysWhileItIsQueued) {
  Queue("job-a", "hpc", 1, /*place=*/false);
  Queue("job-c", "gpu", 1, /*place=*/false);
  state_.SetPoolNotes({"job-a", "job-c"}, {{"job-c", "pool gpu backs off until 12:00"}});
  state_.SetPoolNotes({"job-a"}, {{"job-a", "pool hpc is at its max_workers"}});
  absl::MutexLock lock(&state_.mu);
  ASSERT_EQ(state_.pool_notes.size(), 2u);
  EXPECT_EQ(state_.pool_notes.at("job-c"), "pool gpu backs off until 12:00");
  EXPECT_EQ(state_.pool_notes.at("job-a"), "pool hpc is at its max_workers");
}

}  // namespace
}  // namespace gantry::server
