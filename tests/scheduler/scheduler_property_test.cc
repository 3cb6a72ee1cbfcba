// Randomised property tests of the Scheduler against FakeCluster's model: random sequences of
// submit/remove/schedule/heartbeat/silence/disconnect/expire keep every invariant (no slot or port
// double-booked, gangs whole, nothing left behind that fits), and a simulation with 2000 workers
// and 5000+ jobs does the same at scale.
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/fake_cluster.h"

namespace gantry::scheduler {
namespace {

using fake::FakeCluster;

const absl::Time kT0 = absl::FromUnixSeconds(1800000000);

int Uniform(std::mt19937& rng, int lo, int hi) {  // inclusive
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}
bool Chance(std::mt19937& rng, double p) { return std::bernoulli_distribution(p)(rng); }

template <typename Map>
std::string RandomKey(std::mt19937& rng, const Map& map) {
  auto it = map.begin();
  std::advance(it, Uniform(rng, 0, static_cast<int>(map.size()) - 1));
  return it->first;
}

gantry::v1::DeviceKind RandomDevice(std::mt19937& rng, double gpu) {
  if (Chance(rng, gpu)) return gantry::v1::DEVICE_KIND_GPU;
  return Chance(rng, 0.5) ? gantry::v1::DEVICE_KIND_CPU : gantry::v1::DEVICE_KIND_UNSPECIFIED;
}

struct Stats {
  int placed = 0;
  int lost_workers = 0;
  int lost_jobs = 0;
  int removed_running = 0;
};

// One random run of `steps` operations on a small cluster with tight port ranges.
void RandomRun(unsigned seed, int steps, Stats* stats) {
  std::mt19937 rng(seed);
  FakeCluster c(SchedulerOptions{absl::Seconds(15)}, kT0);
  const int workers = Uniform(rng, 4, 14);
  for (int i = 0; i < workers; ++i) {
    WorkerState w;
    w.id = absl::StrCat("wrk-", i);
    w.name = absl::StrCat("node", i);
    w.slots = Uniform(rng, 1, 4);
    w.device = RandomDevice(rng, 0.2);
    w.labels["pool"] = Chance(rng, 0.5) ? "a" : "b";
    if (Chance(rng, 0.5)) w.labels["zone"] = Chance(rng, 0.5) ? "x" : "y";
    w.host = absl::StrCat("10.0.0.", i);
    w.port_min = 29400;
    w.port_max = 29400 + Uniform(rng, 0, 2);  // 1-3 ports: rendezvous ports do run out
    for (int d = 0; d < 3; ++d) {
      if (Chance(rng, 0.3)) w.cached_datasets.insert(absl::StrCat("sha-", d));
    }
    c.AddWorker(w, Chance(rng, 0.3) ? Uniform(rng, 0, w.slots) : 0);
  }
  int next_job = 0;
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE(absl::StrCat("seed ", seed, " step ", step));
    const int op = Uniform(rng, 0, 99);
    if (op < 28) {
      JobRequest j;
      j.id = absl::StrCat("job-", next_job++);
      j.world_size = Uniform(rng, 1, 5);
      j.priority = Uniform(rng, 0, 2);
      j.submitted = c.now() + absl::Milliseconds(Uniform(rng, 0, 3000));
      j.device = RandomDevice(rng, 0.15);
      if (Chance(rng, 0.5)) j.selector["pool"] = Chance(rng, 0.5) ? "a" : "b";
      if (Chance(rng, 0.2)) j.selector["zone"] = Chance(rng, 0.5) ? "x" : "y";
      if (Chance(rng, 0.6)) j.dataset_key = absl::StrCat("sha-", Uniform(rng, 0, 3));
      c.Submit(j);
    } else if (op < 32) {  // a repeated submit of a known job changes nothing
      if (!c.queued().empty()) c.Submit(c.queued().at(RandomKey(rng, c.queued())));
      if (!c.placed().empty()) c.Submit(c.placed().at(RandomKey(rng, c.placed())).request);
    } else if (op < 46) {
      if (!c.placed().empty() && Chance(rng, 0.7)) {
        c.Remove(RandomKey(rng, c.placed()));
        ++stats->removed_running;
      } else if (!c.queued().empty()) {
        c.Remove(RandomKey(rng, c.queued()));
      } else {
        c.Remove("job-unknown");
      }
    } else if (op < 66) {
      stats->placed += static_cast<int>(c.Schedule(/*check_left_behind=*/true).size());
    } else if (op < 76) {
      c.HeartbeatAll(absl::Seconds(3));
    } else if (op < 82) {
      c.Advance(absl::Milliseconds(Uniform(rng, 500, 6000)));
    } else if (op < 85) {
      auto& w = c.workers().at(RandomKey(rng, c.workers()));
      w.heartbeating = !w.heartbeating;
    } else if (op < 88) {
      c.Disconnect(RandomKey(rng, c.workers()));
    } else if (op < 91) {
      c.Reconnect(RandomKey(rng, c.workers()));
    } else if (op < 94) {
      auto& w = c.workers().at(RandomKey(rng, c.workers()));
      if (w.foreign > 0) --w.foreign;  // a rank from before a restart ends
    } else {
      for (const LostWorker& l : c.Expire()) {
        ++stats->lost_workers;
        stats->lost_jobs += static_cast<int>(l.job_ids.size());
      }
    }
    c.CheckInvariants();
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(SchedulerPropertyTest, RandomOperationSequencesKeepInvariants) {
  Stats stats;
  for (unsigned seed = 1; seed <= 60; ++seed) {
    RandomRun(seed, 500, &stats);
    if (HasFailure()) return;
  }
  // The runs must actually exercise placement, loss and release.
  EXPECT_GT(stats.placed, 1000);
  EXPECT_GT(stats.lost_workers, 20);
  EXPECT_GT(stats.lost_jobs, 10);
  EXPECT_GT(stats.removed_running, 100);
}

TEST(SchedulerSimulationTest, TwoThousandWorkersFiveThousandJobs) {
  std::mt19937 rng(20261122);
  FakeCluster c(SchedulerOptions{absl::Seconds(15)}, kT0);
  int total_slots = 0;
  for (int i = 0; i < 2000; ++i) {
    WorkerState w;
    w.id = absl::StrCat("wrk-", 100000 + i);
    w.name = absl::StrCat("node", i);
    w.slots = Uniform(rng, 1, 8);
    w.device = Chance(rng, 0.1) ? gantry::v1::DEVICE_KIND_GPU : gantry::v1::DEVICE_KIND_CPU;
    w.labels["pool"] = absl::StrCat("p", Uniform(rng, 0, 3));
    w.labels["zone"] = absl::StrCat("z", Uniform(rng, 0, 7));
    w.host = absl::StrCat("node", i, ".cluster");
    for (int d = Uniform(rng, 0, 3); d > 0; --d) {
      w.cached_datasets.insert(absl::StrCat("sha-", Uniform(rng, 0, 49)));
    }
    total_slots += w.slots;
    c.AddWorker(w, Chance(rng, 0.05) ? 1 : 0);
  }
  const int kSizes[] = {1, 1, 1, 2, 2, 4, 4, 8, 16};
  int next_job = 0;
  auto submit = [&](int n) {
    for (int i = 0; i < n; ++i) {
      JobRequest j;
      j.id = absl::StrCat("job-", 1000000 + next_job++);
      j.world_size = kSizes[Uniform(rng, 0, 8)];
      j.priority = Uniform(rng, 0, 3);
      j.submitted = c.now() + absl::Milliseconds(i);
      j.device = Chance(rng, 0.1) ? gantry::v1::DEVICE_KIND_GPU : gantry::v1::DEVICE_KIND_CPU;
      const int kind = Uniform(rng, 0, 9);
      if (kind < 5) j.selector["pool"] = absl::StrCat("p", Uniform(rng, 0, 3));
      if (kind >= 5 && kind < 7) {
        j.selector["pool"] = absl::StrCat("p", Uniform(rng, 0, 3));
        j.selector["zone"] = absl::StrCat("z", Uniform(rng, 0, 7));
      }
      if (Chance(rng, 0.7)) j.dataset_key = absl::StrCat("sha-", Uniform(rng, 0, 49));
      c.Submit(j);
    }
  };

  submit(5000);
  const int first = static_cast<int>(c.Schedule(true, /*left_behind_sample=*/300).size());
  c.CheckInvariants();
  ASSERT_FALSE(HasFailure());
  EXPECT_GT(first, 1000);
  int leased = 0;
  for (const auto& [id, w] : c.workers()) leased += c.scheduler().LeasedSlots(id);
  EXPECT_GT(leased, total_slots / 2) << "the first round should fill most of the cluster";

  int placed = first, lost = 0;
  for (int tick = 0; tick < 60; ++tick) {
    SCOPED_TRACE(absl::StrCat("tick ", tick));
    c.Advance(absl::Seconds(2));
    // Some jobs finish.
    std::vector<std::string> done;
    for (const auto& [id, job] : c.placed()) {
      if (Chance(rng, 0.05)) done.push_back(id);
    }
    for (const std::string& id : done) c.Remove(id);
    // A few workers go silent, a few lost ones come back.
    for (int i = 0; i < 3; ++i) c.workers().at(RandomKey(rng, c.workers())).heartbeating = false;
    for (int i = 0; i < 2; ++i) {
      auto& [id, w] = *std::next(c.workers().begin(), Uniform(rng, 0, 1999));
      if (w.lost) c.Reconnect(id);
    }
    c.HeartbeatAll(absl::Seconds(4));
    lost += static_cast<int>(c.Expire().size());
    submit(30);
    placed += static_cast<int>(c.Schedule(true, /*left_behind_sample=*/100).size());
    c.CheckInvariants();
    ASSERT_FALSE(HasFailure());
  }
  EXPECT_GT(placed, first) << "freed slots are reused";
  EXPECT_GT(lost, 50);
}

}  // namespace
}  // namespace gantry::scheduler
