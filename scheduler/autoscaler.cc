#include "scheduler/autoscaler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace gantry::scheduler {
namespace {

// One elastic pool while planning.
struct PoolTally {
  const PoolConfig* config = nullptr;
  PoolProvisioning provisioning;
  int live = 0;        // connected workers
  int free_slots = 0;  // on live, not draining workers
  int planned = 0;     // new workers this plan adds
  std::vector<std::string> planned_for;
  int pending_slots_left = 0;
  int waiting = 0;
  std::vector<const PoolWorker*> idle;  // candidates for scale-down
};

int CeilDiv(int a, int b) { return (a + b - 1) / b; }

}  // namespace

AutoscalePlan Autoscaler::Plan(const std::vector<PoolConfig>& pools,
                               const std::vector<PoolWorker>& workers,
                               const std::vector<PoolJob>& jobs,
                               const std::map<std::string, PoolProvisioning>& provisioning,
                               absl::Time now) const {
  AutoscalePlan plan;
  std::map<std::string, PoolTally> tallies;
  for (const PoolConfig& pool : pools) {
    PoolTally& t = tallies[pool.name];
    t.config = &pool;
    if (auto it = provisioning.find(pool.name); it != provisioning.end()) {
      t.provisioning = it->second;
    }
    t.pending_slots_left =
        std::max(0, t.provisioning.pending_workers) * std::max(1, pool.slots_per_worker);
  }
  for (const PoolWorker& w : workers) {
    auto it = tallies.find(w.pool);
    if (it == tallies.end()) continue;
    PoolTally& t = it->second;
    ++t.live;
    if (!w.draining) t.free_slots += std::max(0, w.slots - w.busy_slots);
    if (w.busy_slots == 0 && !w.draining && now - w.idle_since >= options_.idle_timeout) {
      t.idle.push_back(&w);
    }
  }
  for (const PoolJob& job : jobs) {
    auto it = tallies.find(job.pool);
    if (it == tallies.end()) continue;
    PoolTally& t = it->second;
    ++t.waiting;
    int need = job.world_size;
    const int from_free = std::min(need, t.free_slots);
    need -= from_free;
    const int from_pending = std::min(need, t.pending_slots_left);
    need -= from_pending;
    if (need == 0) {
      t.free_slots -= from_free;
      t.pending_slots_left -= from_pending;
      continue;
    }
    const PoolConfig& pool = *t.config;
    if (!pool.elastic) continue;  // static: the scheduler's wait reason says it all
    const int per_worker = std::max(1, pool.slots_per_worker);
    const int extra = CeilDiv(need, per_worker);
    const int after = t.live + t.provisioning.pending_workers + t.planned + extra;
    if (after > pool.max_workers) {
      plan.job_notes[job.id] = absl::StrCat(
          "pool ", pool.name, " cannot grow by ", extra, " workers for this gang of ",
          job.world_size, ": it would have ", after, " workers, max_workers is ", pool.max_workers,
          " (", t.live, " running, ", t.provisioning.pending_workers + t.planned,
          " starting); it waits for slots to free up");
      continue;  // never half a gang; later (smaller) jobs may still fit
    }
    if (t.provisioning.call_in_flight) {
      plan.job_notes[job.id] =
          absl::StrCat("pool ", pool.name, " is being scaled up; waiting for workers to join");
      continue;
    }
    if (now < t.provisioning.backoff_until) {
      plan.job_notes[job.id] = absl::StrCat(
          "pool ", pool.name, " cannot scale up: ", t.provisioning.last_error, "; retrying at ",
          absl::FormatTime("%H:%M:%S UTC", t.provisioning.backoff_until, absl::UTCTimeZone()));
      continue;
    }
    t.free_slots -= from_free;
    t.pending_slots_left -= from_pending;
    t.pending_slots_left += extra * per_worker - need;  // the new workers' spare slots
    t.planned += extra;
    t.planned_for.push_back(job.id);
  }
  for (auto& [name, t] : tallies) {
    const PoolConfig& pool = *t.config;
    plan.waiting_jobs[name] = t.waiting;
    if (!pool.elastic) continue;
    const bool can_call = !t.provisioning.call_in_flight && now >= t.provisioning.backoff_until;
    const int total = t.live + t.provisioning.pending_workers + t.planned;
    if (total < pool.min_workers && can_call) t.planned += pool.min_workers - total;
    if (t.planned > 0) {
      plan.scale_ups.push_back({name, t.planned, t.planned_for});
      continue;
    }
    if (t.waiting > 0 || t.provisioning.pending_workers > 0 || t.provisioning.call_in_flight) {
      continue;
    }
    int removable = t.live - pool.min_workers;
    if (removable <= 0 || t.idle.empty()) continue;
    std::sort(t.idle.begin(), t.idle.end(), [](const PoolWorker* a, const PoolWorker* b) {
      return a->idle_since != b->idle_since ? a->idle_since < b->idle_since : a->id < b->id;
    });
    ScaleDown down{name, {}};
    for (const PoolWorker* w : t.idle) {
      if (removable-- <= 0) break;
      down.worker_ids.push_back(w->id);
    }
    plan.scale_downs.push_back(std::move(down));
  }
  return plan;
}

}  // namespace gantry::scheduler
