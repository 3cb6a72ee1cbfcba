// A FakeCluster drives a Scheduler the way the server does and keeps an independent model of the
// workers (what really runs on them, including ranks the scheduler does not know of) to check the
// scheduler's decisions and invariants against. Test-only; not thread-safe.
#ifndef GANTRY_TESTS_SCHEDULER_FAKE_CLUSTER_H_
#define GANTRY_TESTS_SCHEDULER_FAKE_CLUSTER_H_

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"

namespace gantry::scheduler::fake {

inline gantry::v1::DeviceKind AsCpu(gantry::v1::DeviceKind d) {
  return d == gantry::v1::DEVICE_KIND_UNSPECIFIED ? gantry::v1::DEVICE_KIND_CPU : d;
}

inline bool LabelsMatch(const WorkerState& w, const JobRequest& j) {
  if (AsCpu(w.device) != AsCpu(j.device)) return false;
  for (const auto& [k, v] : j.selector) {
    auto it = w.labels.find(k);
    if (it == w.labels.end() || it->second != v) return false;
  }
  return true;
}

class FakeCluster {
 public:
  struct FakeWorker {
    WorkerState state;
    int foreign = 0;           // ranks running that the scheduler never placed
    bool connected = true;     // has a stream
    bool heartbeating = true;  // sends heartbeats while connected
    bool lost = false;         // as the scheduler should see it
    absl::Time last_heartbeat;
    std::map<std::string, int> running;  // job id -> ranks of it running here
    int Busy() const {
      int n = foreign;
      for (const auto& [id, r] : running) n += r;
      return n;
    }
  };
  struct PlacedJob {
    JobRequest request;
    Placement placement;
  };

  FakeCluster(SchedulerOptions options, absl::Time start)
      : options_(options), scheduler_(options), now_(start) {}

  Scheduler& scheduler() { return scheduler_; }
  absl::Time now() const { return now_; }
  void Advance(absl::Duration d) { now_ += d; }
  std::map<std::string, FakeWorker>& workers() { return workers_; }
  const std::map<std::string, JobRequest>& queued() const { return queued_; }
  const std::map<std::string, PlacedJob>& placed() const { return placed_; }

  // Registration followed at once by the first heartbeat (what a worker daemon does).
  void AddWorker(const WorkerState& state, int foreign) {
    FakeWorker& w = workers_[state.id];
    w.state = state;
    w.foreign = foreign;
    Reconnect(state.id);
  }
  void Reconnect(const std::string& id) {
    FakeWorker& w = workers_.at(id);
    w.connected = true;
    w.heartbeating = true;
    scheduler_.UpsertWorker(w.state, now_);
    w.lost = false;
    w.last_heartbeat = now_;
    SendHeartbeat(id);
  }
  void Disconnect(const std::string& id) {
    workers_.at(id).connected = false;
    scheduler_.MarkDisconnected(id);
  }
  void SendHeartbeat(const std::string& id) {
    FakeWorker& w = workers_.at(id);
    ASSERT_TRUE(
        scheduler_.Heartbeat(id, w.state.slots - w.Busy(), w.state.cached_datasets, now_).ok());
    w.lost = false;
    w.last_heartbeat = now_;
  }
  // Heartbeats from every connected, heartbeating worker last heard from at least `every` ago.
  void HeartbeatAll(absl::Duration every) {
    for (auto& [id, w] : workers_) {
      if (w.connected && w.heartbeating && now_ - w.last_heartbeat >= every) SendHeartbeat(id);
    }
  }

  void Submit(const JobRequest& job) {
    ASSERT_TRUE(scheduler_.Submit(job).ok());
    if (!placed_.count(job.id)) queued_.emplace(job.id, job);
  }
  // The job finished or was cancelled: its ranks stop, the server removes it.
  void Remove(const std::string& id) {
    bool known = queued_.erase(id) > 0;
    auto it = placed_.find(id);
    if (it != placed_.end()) {
      StopRanks(id);
      placed_.erase(it);
      known = true;
    }
    EXPECT_EQ(scheduler_.Remove(id), known) << id;
  }

  // Runs one scheduling round and checks every placement and that no queued job was left behind
  // while enough matching slots were free (except for a lack of rendezvous ports or a
  // reservation for a job ahead of it).
  std::vector<Placement> Schedule(bool check_left_behind, size_t left_behind_sample = SIZE_MAX) {
    std::vector<Placement> out = scheduler_.Schedule(now_);
    for (const Placement& p : out) {
      auto q = queued_.find(p.job_id);
      if (q == queued_.end()) {
        ADD_FAILURE() << "placed a job that is not queued: " << p.job_id;
        continue;
      }
      const JobRequest& job = q->second;
      EXPECT_EQ(static_cast<int>(p.rank_workers.size()), job.world_size) << p.job_id;
      std::map<std::string, int> ranks;
      for (const std::string& id : p.rank_workers) ++ranks[id];
      for (const auto& [id, n] : ranks) {
        auto w = workers_.find(id);
        if (w == workers_.end()) {
          ADD_FAILURE() << p.job_id << " placed on unknown worker " << id;
          continue;
        }
        EXPECT_TRUE(Placeable(w->second)) << p.job_id << " placed on unavailable worker " << id;
        EXPECT_TRUE(LabelsMatch(w->second.state, job)) << p.job_id << " on " << id;
        w->second.running[p.job_id] += n;
        EXPECT_LE(w->second.Busy(), w->second.state.slots)
            << "worker " << id << " oversubscribed by " << p.job_id;
      }
      if (!p.rank_workers.empty()) {
        const FakeWorker& w0 = workers_.at(p.rank_workers[0]);
        EXPECT_EQ(p.rendezvous_host, w0.state.host);
        EXPECT_GE(p.rendezvous_port, w0.state.port_min);
        EXPECT_LE(p.rendezvous_port, w0.state.port_max);
        for (const auto& [id, n] : ranks) EXPECT_LE(n, ranks[p.rank_workers[0]]) << p.job_id;
      }
      placed_[p.job_id] = PlacedJob{job, p};
      queued_.erase(q);
    }
    if (check_left_behind) CheckNothingLeftBehind(left_behind_sample);
    return out;
  }

  // Expires silent workers and checks the report against the model.
  std::vector<LostWorker> Expire() {
    std::map<std::string, std::set<std::string>> expected;
    for (auto& [id, w] : workers_) {
      if (w.lost || now_ - w.last_heartbeat <= options_.lease_timeout) continue;
      w.lost = true;
      std::set<std::string>& jobs = expected[id];
      for (const auto& [job_id, r] : placed_) {
        for (const std::string& rw : r.placement.rank_workers) {
          if (rw == id) jobs.insert(job_id);
        }
      }
    }
    std::vector<LostWorker> lost = scheduler_.ExpireLeases(now_);
    std::map<std::string, std::set<std::string>> got;
    for (const LostWorker& l : lost) {
      EXPECT_FALSE(got.count(l.worker_id)) << "reported twice: " << l.worker_id;
      got[l.worker_id] = std::set<std::string>(l.job_ids.begin(), l.job_ids.end());
    }
    EXPECT_EQ(got, expected);
    for (const auto& [id, jobs] : expected) {
      for (const std::string& job_id : jobs) {
        if (!placed_.count(job_id)) continue;
        StopRanks(job_id);  // the server fails the job and cancels its other ranks
        placed_.erase(job_id);
      }
    }
    return lost;
  }

  bool Placeable(const FakeWorker& w) const {
    return w.connected && !w.lost && now_ - w.last_heartbeat <= options_.lease_timeout;
  }

  void CheckInvariants() {
    std::map<std::string, int> leased;
    std::map<std::string, std::set<int>> ports;
    for (const auto& [id, job] : placed_) {
      const Placement& p = job.placement;
      EXPECT_EQ(static_cast<int>(p.rank_workers.size()), job.request.world_size) << id;
      for (const std::string& w : p.rank_workers) ++leased[w];
      EXPECT_TRUE(ports[p.rank_workers[0]].insert(p.rendezvous_port).second)
          << "port " << p.rendezvous_port << " on " << p.rank_workers[0] << " leased twice";
      std::optional<Placement> held = scheduler_.PlacementOf(id);
      if (!held) {
        ADD_FAILURE() << "scheduler forgot " << id;
      } else {
        EXPECT_EQ(held->rank_workers, p.rank_workers);
        EXPECT_EQ(held->rendezvous_port, p.rendezvous_port);
      }
    }
    for (const auto& [id, w] : workers_) {
      EXPECT_EQ(scheduler_.LeasedSlots(id), leased[id]) << id;
      EXPECT_LE(scheduler_.LeasedSlots(id), w.state.slots) << id;
      EXPECT_LE(w.Busy(), w.state.slots) << "worker " << id << " oversubscribed";
      EXPECT_GE(scheduler_.FreeSlots(id), 0);
      EXPECT_LE(scheduler_.FreeSlots(id), w.state.slots - w.Busy()) << id;
    }
    std::vector<std::string> placed_ids;
    for (const auto& [id, job] : placed_) placed_ids.push_back(id);
    EXPECT_EQ(scheduler_.PlacedJobs(), placed_ids);
    std::vector<std::tuple<int, absl::Time, std::string>> order;
    for (const auto& [id, job] : queued_) order.emplace_back(-job.priority, job.submitted, id);
    std::sort(order.begin(), order.end());
    std::vector<std::string> queued_ids;
    for (const auto& entry : order) queued_ids.push_back(std::get<2>(entry));
    EXPECT_EQ(scheduler_.QueuedJobs(), queued_ids);
  }

 private:
  void StopRanks(const std::string& job_id) {
    for (const std::string& id : placed_.at(job_id).placement.rank_workers) {
      workers_.at(id).running.erase(job_id);
    }
  }

  // Backfill completeness: after a round, a queued job either lacks free matching slots or was
  // stopped by its rank-0 worker's rendezvous ports.
  void CheckNothingLeftBehind(size_t sample) {
    size_t checked = 0;
    for (const auto& [id, job] : queued_) {
      if (checked++ >= sample) break;
      long free = 0;
      for (const auto& [wid, w] : workers_) {
        if (Placeable(w) && LabelsMatch(w.state, job)) free += scheduler_.FreeSlots(wid);
      }
      if (free >= job.world_size) {
        // Free slots may be held back for a lack of ports, or reserved for a larger job ahead.
        const std::string reason = scheduler_.WaitReason(id);
        EXPECT_TRUE(absl::StrContains(reason, "rendezvous port") ||
                    (options_.reservations && absl::StrContains(reason, "reserved for")))
            << id << " left queued with " << free << " free matching slots for " << job.world_size
            << ": " << scheduler_.WaitReason(id);
      }
    }
  }

  SchedulerOptions options_;
  Scheduler scheduler_;
  absl::Time now_;
  std::map<std::string, FakeWorker> workers_;
  std::map<std::string, JobRequest> queued_;
  std::map<std::string, PlacedJob> placed_;
};

}  // namespace gantry::scheduler::fake

#endif  // GANTRY_TESTS_SCHEDULER_FAKE_CLUSTER_H_
