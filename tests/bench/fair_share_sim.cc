#include "tests/bench/fair_share_sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <queue>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "scheduler/pool_choice.h"
#include "scheduler/scheduler.h"

namespace gantry::bench {
namespace {

using scheduler::JobRequest;
using scheduler::Placement;
using scheduler::PoolConfig;

struct PoolShape {
  const char* name;
  gantry::v1::DeviceKind device;
  double price;
  bool preemptible;
  int slots_per_worker;
  double share_of_workers;
};

// List order is the cost-blind choice's order: the expensive pool of each device kind first.
constexpr PoolShape kPools[] = {
    // Sizes roughly follow the load the cheapest-pool choice puts on each pool.
    {"gpu-b", gantry::v1::DEVICE_KIND_GPU, 3.2, false, 8, 0.05},
    {"gpu-a", gantry::v1::DEVICE_KIND_GPU, 2.5, false, 4, 0.30},
    {"cpu-cloud", gantry::v1::DEVICE_KIND_CPU, 0.12, false, 4, 0.15},
    {"cpu-onprem", gantry::v1::DEVICE_KIND_CPU, 0.05, false, 8, 0.25},
    {"cpu-spot", gantry::v1::DEVICE_KIND_CPU, 0.03, true, 4, 0.25},
};

struct SimJob {
  JobRequest request;
  double submit_h = 0;
  double runtime_h = 0;
  double start_h = -1;
  std::string pool;
  double price = 0;
};

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t index = static_cast<size_t>(std::ceil(q * values.size())) - 1;
  return values[std::min(index, values.size() - 1)];
}

}  // namespace

SimReport RunFairShareSimulation(const SimConfig& config) {
  SimReport report;
  std::mt19937_64 rng(config.seed);
  const absl::Time t0 = absl::FromUnixSeconds(1800000000);
  auto at = [&](double hours) { return t0 + absl::Seconds(hours * 3600); };

  scheduler::Scheduler sched(
      scheduler::SchedulerOptions{absl::InfiniteDuration(), config.reservations});

  // Pools and workers.
  std::vector<PoolConfig> pools;
  std::map<std::string, int> worker_slots;  // worker id -> slots
  long total_slots = 0;
  for (const PoolShape& shape : kPools) {
    PoolConfig pool;
    pool.name = shape.name;
    pool.device = shape.device;
    pool.price_per_device_hour = shape.price;
    pool.preemptible = shape.preemptible;
    pool.slots_per_worker = shape.slots_per_worker;
    pools.push_back(pool);
    const int count =
        std::max(1, static_cast<int>(std::lround(config.workers * shape.share_of_workers)));
    for (int i = 0; i < count; ++i) {
      scheduler::WorkerState w;
      w.id = absl::StrFormat("wrk-%s-%04d", shape.name, i);
      w.name = w.id;
      w.slots = shape.slots_per_worker;
      w.device = shape.device;
      w.labels["pool"] = shape.name;
      w.host = w.id;
      sched.UpsertWorker(w, t0);
      worker_slots[w.id] = w.slots;
      total_slots += w.slots;
    }
  }
  std::map<std::string, int> pool_slots;
  for (const auto& [id, slots] : worker_slots) {
    for (const PoolShape& shape : kPools) {
      if (id.rfind(absl::StrCat("wrk-", shape.name, "-"), 0) == 0) pool_slots[shape.name] += slots;
    }
  }

  // Tenants: weights 1..4 in turn; the first five may hold a quarter of two cheap pools (at least
  // the largest gang, so every job can run).
  std::vector<double> weight(config.tenants);
  std::map<std::string, scheduler::TenantPolicy> policies;
  std::map<std::pair<std::string, std::string>, int> quota;
  for (int t = 0; t < config.tenants; ++t) {
    const std::string tenant = absl::StrFormat("t%02d", t);
    weight[t] = 1 + t % 4;
    scheduler::TenantPolicy& policy = policies[tenant];
    policy.weight = weight[t];
    if (t < 5) {
      for (const char* pool : {"cpu-onprem", "gpu-a"}) {
        const int slots = std::max(64, pool_slots[pool] / 4);
        policy.max_slots_per_pool[pool] = slots;
        if (config.fair_share) quota[{tenant, pool}] = slots;
      }
    }
  }
  if (config.fair_share && !sched.SetTenantPolicies(policies).ok()) {
    report.violations.push_back("policies refused");
  }

  // Jobs: Poisson arrivals, gang sizes 1-64, exponential run times.
  const std::pair<int, double> kSizes[] = {{1, 0.40},  {2, 0.15},  {4, 0.15}, {8, 0.12},
                                           {16, 0.08}, {32, 0.06}, {64, 0.04}};
  std::exponential_distribution<double> gap(config.jobs / config.arrival_hours);
  std::exponential_distribution<double> runtime(1 / 0.5);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<SimJob> jobs(config.jobs);
  double clock = 0;
  for (int i = 0; i < config.jobs; ++i) {
    SimJob& job = jobs[i];
    clock += gap(rng);
    job.submit_h = clock;
    job.runtime_h = std::clamp(runtime(rng), 0.05, 6.0);
    JobRequest& r = job.request;
    r.id = absl::StrFormat("job-%06d", i);
    r.tenant = absl::StrFormat("t%02d", static_cast<int>(unit(rng) * config.tenants));
    r.submitted = at(job.submit_h);
    r.priority = unit(rng) < 0.1 ? 1 : 0;
    double pick = unit(rng);
    for (const auto& [size, p] : kSizes) {
      r.world_size = size;
      if ((pick -= p) <= 0) break;
    }
    r.device = unit(rng) < 0.35 ? gantry::v1::DEVICE_KIND_GPU : gantry::v1::DEVICE_KIND_CPU;
    scheduler::PoolRequirements needs;
    needs.device = r.device;
    needs.world_size = r.world_size;
    needs.allow_preemptible = unit(rng) < 0.3;
    if (unit(rng) < 0.4) {  // names a pool of its device
      std::vector<const PoolConfig*> same;
      for (const PoolConfig& p : pools) {
        if (p.device == r.device) same.push_back(&p);
      }
      needs.pool = same[static_cast<size_t>(unit(rng) * same.size()) % same.size()]->name;
    }
    if (config.cost_blind && needs.pool.empty()) {
      for (const PoolConfig& p : pools) {
        if (p.device == r.device && (!p.preemptible || needs.allow_preemptible)) {
          job.pool = p.name;
          break;
        }
      }
    } else {
      job.pool = scheduler::ChoosePool(pools, needs).value_or("");
    }
    r.selector["pool"] = job.pool;
    for (const PoolConfig& p : pools) {
      if (p.name == job.pool) job.price = p.price_per_device_hour;
    }
  }

  // The event loop: completions and arrivals, then one Schedule() per distinct time.
  using Completion = std::pair<double, int>;  // end time, job index
  std::priority_queue<Completion, std::vector<Completion>, std::greater<Completion>> running;
  std::map<std::string, int> index_of;
  for (int i = 0; i < config.jobs; ++i) index_of[jobs[i].request.id] = i;
  std::map<std::string, int> busy;                          // worker -> ranks running (model)
  std::map<std::pair<std::string, std::string>, int> held;  // (tenant, pool) -> slots (model)
  std::vector<int> queued_of(config.tenants, 0);
  std::vector<int> held_by(config.tenants, 0);  // slots held per tenant (model)
  std::vector<double> schedule_ms;
  const double window = clock;  // arrivals end here
  double last = 0, busy_slots = 0, busy_integral = 0, jain = 1, jain_integral = 0, jain_time = 0;
  report.jain_min = 1;
  bool jain_valid = false;
  size_t next_arrival = 0;
  auto tenant_index = [](const std::string& tenant) { return std::stoi(tenant.substr(1)); };
  while (next_arrival < jobs.size() || !running.empty()) {
    double now = next_arrival < jobs.size() ? jobs[next_arrival].submit_h : 1e18;
    if (!running.empty()) now = std::min(now, running.top().first);
    const double until = std::min(now, window);
    if (until > last) {
      busy_integral += busy_slots * (until - last);
      if (jain_valid) {
        jain_integral += jain * (until - last);
        jain_time += until - last;
      }
    }
    last = now;
    while (!running.empty() && running.top().first <= now) {
      SimJob& job = jobs[running.top().second];
      running.pop();
      std::optional<Placement> placement = sched.PlacementOf(job.request.id);
      if (placement) {
        for (const std::string& w : placement->rank_workers) --busy[w];
      }
      held[{job.request.tenant, job.pool}] -= job.request.world_size;
      held_by[tenant_index(job.request.tenant)] -= job.request.world_size;
      busy_slots -= job.request.world_size;
      sched.Remove(job.request.id);
      ++report.finished;
      report.cost += job.request.world_size * job.runtime_h * job.price;
      report.makespan_h = std::max(report.makespan_h, now);
    }
    while (next_arrival < jobs.size() && jobs[next_arrival].submit_h <= now) {
      const SimJob& job = jobs[next_arrival++];
      JobRequest request = job.request;
      if (!config.fair_share) request.tenant.clear();  // FIFO: one anonymous tenant
      if (!sched.Submit(request).ok()) report.violations.push_back("submit refused");
      ++queued_of[tenant_index(job.request.tenant)];
    }
    const auto start = std::chrono::steady_clock::now();
    std::vector<Placement> placed = sched.Schedule(at(now));
    schedule_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    for (const Placement& p : placed) {
      const int i = index_of.at(p.job_id);
      SimJob& job = jobs[i];
      job.start_h = now;
      running.push({now + job.runtime_h, i});
      busy_slots += job.request.world_size;
      --queued_of[tenant_index(job.request.tenant)];
      held_by[tenant_index(job.request.tenant)] += job.request.world_size;
      if (!config.check_invariants) continue;
      if (static_cast<int>(p.rank_workers.size()) != job.request.world_size) {
        report.violations.push_back(absl::StrCat(p.job_id, " placed with ", p.rank_workers.size(),
                                                 " ranks of ", job.request.world_size));
      }
      for (const std::string& w : p.rank_workers) {
        if (++busy[w] > worker_slots.at(w)) {
          report.violations.push_back(absl::StrCat("worker ", w, " over-booked by ", p.job_id));
        }
        if (w.rfind(absl::StrCat("wrk-", job.pool, "-"), 0) != 0) {
          report.violations.push_back(absl::StrCat(p.job_id, " of pool ", job.pool, " on ", w));
        }
      }
      const std::pair<std::string, std::string> key{job.request.tenant, job.pool};
      held[key] += job.request.world_size;
      if (auto q = quota.find(key); q != quota.end() && held[key] > q->second) {
        report.violations.push_back(absl::StrCat("tenant ", key.first, " holds ", held[key],
                                                 " slots on ", key.second, ", quota ", q->second));
      }
    }
    // Jain's index of slots held / weight over the tenants that have queued jobs.
    double sum = 0, squares = 0;
    int backlogged = 0;
    for (int t = 0; t < config.tenants; ++t) {
      if (queued_of[t] == 0) continue;
      const double x = held_by[t] / weight[t];
      sum += x;
      squares += x * x;
      ++backlogged;
    }
    jain_valid = backlogged >= 2 && squares > 0 && now < window;
    if (jain_valid) {
      jain = sum * sum / (backlogged * squares);
      report.jain_min = std::min(report.jain_min, jain);
    }
    ++report.rounds;
  }

  double total = 0;
  for (double ms : schedule_ms) total += ms;
  report.schedule_mean_ms = schedule_ms.empty() ? 0 : total / schedule_ms.size();
  report.schedule_p99_ms = Percentile(schedule_ms, 0.99);
  report.schedule_max_ms = Percentile(schedule_ms, 1.0);
  report.utilisation = busy_integral / (static_cast<double>(total_slots) * window);
  report.jain_mean = jain_time > 0 ? jain_integral / jain_time : 0;
  std::vector<double> waits, large_waits;
  for (const SimJob& job : jobs) {
    if (job.start_h < 0) {
      report.violations.push_back(absl::StrCat(job.request.id, " never started"));
      continue;
    }
    waits.push_back(job.start_h - job.submit_h);
    if (job.request.world_size >= 32) large_waits.push_back(job.start_h - job.submit_h);
  }
  report.large_gangs = static_cast<int>(large_waits.size());
  report.large_wait_p95_h = Percentile(large_waits, 0.95);
  report.large_wait_max_h = Percentile(large_waits, 1.0);
  report.wait_p95_h = Percentile(waits, 0.95);
  return report;
}

}  // namespace gantry::bench
