#include "server/pools/pool_autoscaler.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "server/pools/pool_provisioners.h"
#include "server/requests/pool_requests.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

std::string Clock(absl::Time t) { return absl::FormatTime("%H:%M:%S UTC", t, absl::UTCTimeZone()); }

void SetTime(absl::Time t, google::protobuf::Timestamp* ts) {
  const int64_t us = absl::ToUnixMicros(t);
  ts->set_seconds(us / 1000000);
  ts->set_nanos(static_cast<int32_t>(us % 1000000) * 1000);
}

}  // namespace

PoolAutoscaler::PoolAutoscaler(storage::PoolRepository& pools, const PoolOptions& options,
                               PoolControl& coordinator)
    : pool_repository_(pools),
      options_(options),
      coordinator_(coordinator),
      autoscaler_(scheduler::AutoscalerOptions{options.idle_timeout}),
      task_(options.autoscale_interval, [this] { Tick(absl::Now()); }) {}

void PoolAutoscaler::Start() { task_.Start(); }

void PoolAutoscaler::Stop() {
  task_.Stop();
  cancel_calls_.store(true);  // provisioner commands under way are killed now
  std::list<Call> calls;
  {
    absl::MutexLock lock(&mu_);
    calls.swap(calls_);
  }
  for (Call& call : calls) call.thread.join();
}

void PoolAutoscaler::Wake() { task_.Wake(); }

void PoolAutoscaler::JoinFinishedCalls() {
  for (auto it = calls_.begin(); it != calls_.end();) {
    if (it->done->load()) {
      it->thread.join();  // returns at once: the call has finished
      it = calls_.erase(it);
    } else {
      ++it;
    }
  }
}

void PoolAutoscaler::Launch(const std::string& pool, std::string action,
                            std::function<absl::Status()> fn,
                            std::function<void(const absl::Status&)> after) {
  PoolRuntime& runtime = pools_[pool];
  runtime.in_flight = true;
  runtime.last_action = absl::StrCat(action, " at ", Clock(absl::Now()));
  GANTRY_LOG(INFO) << "pool " << pool << ": " << action;
  auto done = std::make_shared<std::atomic<bool>>(false);
  const absl::Duration base = options_.backoff;
  std::thread thread(
      [this, pool, action, fn = std::move(fn), after = std::move(after), done, base] {
        const absl::Status status = fn();
        {
          absl::MutexLock lock(&mu_);
          PoolRuntime& runtime = pools_[pool];
          runtime.in_flight = false;
          if (status.ok()) {
            runtime.failures = 0;
            runtime.last_error.clear();
            runtime.backoff_until = absl::InfinitePast();
          } else {
            ++runtime.failures;
            runtime.last_error = std::string(status.message());
            runtime.last_error_at = absl::Now();
            runtime.backoff_until = absl::Now() + base * (1 << std::min(runtime.failures - 1, 5));
            GANTRY_LOG(WARNING) << "pool " << pool << ": " << action << " failed: " << status
                                << "; no scale-up before " << Clock(runtime.backoff_until);
          }
          after(status);
          task_.Wake();
        }
        done->store(true);
      });
  calls_.push_back(Call{std::move(thread), done});
}

void PoolAutoscaler::Tick(absl::Time now) {
  absl::StatusOr<std::vector<v1::Pool>> listed = pool_repository_.List();
  if (!listed.ok()) {
    GANTRY_LOG(WARNING) << "the pool autoscaler cannot list pools: " << listed.status();
    return;
  }
  std::vector<scheduler::PoolConfig> configs;
  PoolsByName by_name;
  for (const v1::Pool& pool : *listed) {
    configs.push_back(PoolConfigOf(pool));
    by_name[pool.name()] = &pool;
  }
  Snapshot snapshot = by_name.empty() ? Snapshot{} : SnapshotOf(by_name);
  RemovalsByPool to_remove;
  std::map<std::string, std::string> notes;
  {
    absl::MutexLock lock(&mu_);
    JoinFinishedCalls();
    Forget(by_name, &snapshot.workers, now);
    const std::map<std::string, scheduler::PoolProvisioning> provisioning =
        Provisioning(by_name, snapshot, now);
    const scheduler::AutoscalePlan plan =
        autoscaler_.Plan(configs, snapshot.workers, snapshot.jobs, provisioning, now);
    notes = plan.job_notes;
    StartScaleUps(plan, snapshot, provisioning, now, &notes);
    for (const scheduler::ScaleDown& down : plan.scale_downs) {
      if (!pools_[down.pool].provisioner->Elastic() || pools_[down.pool].in_flight) continue;
      for (const std::string& id : down.worker_ids) {
        to_remove[down.pool].push_back(snapshot.refs[id]);
      }
    }
    ObserveAndWithdraw(plan, by_name, provisioning, snapshot, &notes);
  }
  RemovalsByPool confirmed = ConfirmRemovals(std::move(to_remove), snapshot.jobs, std::move(notes));
  if (confirmed.empty()) return;
  absl::MutexLock lock(&mu_);
  for (auto& [pool, list] : confirmed) StartScaleDown(pool, std::move(list));
}

PoolAutoscaler::Snapshot PoolAutoscaler::SnapshotOf(const PoolsByName& by_name) {
  Snapshot snapshot;
  const CoordinatorSnapshot seen = coordinator_.Snapshot();
  for (const WorkerView& view : seen.workers) {
    auto label = view.labels.find("pool");
    if (label == view.labels.end() || !by_name.count(label->second)) continue;
    if (!view.live) continue;
    scheduler::PoolWorker w;
    w.id = view.id;
    w.pool = label->second;
    w.slots = view.slots;
    w.busy_slots = std::max(view.leased_slots, view.running_ranks);
    w.draining = view.draining;
    ++snapshot.live[w.pool];
    snapshot.workers.push_back(w);
    snapshot.refs[view.id] = ProvisionedWorker{view.id, view.name, view.labels};
  }
  for (const scheduler::JobRequest& request : seen.demand) {
    auto it = request.selector.find("pool");
    if (it == request.selector.end() || !by_name.count(it->second)) continue;
    snapshot.jobs.push_back({request.id, it->second, request.world_size});
  }
  return snapshot;
}

void PoolAutoscaler::Forget(const PoolsByName& by_name, std::vector<scheduler::PoolWorker>* workers,
                            absl::Time now) {
  // Idle clocks: reset while busy, started when first seen.
  std::set<std::string> seen;
  for (scheduler::PoolWorker& w : *workers) {
    seen.insert(w.id);
    auto [it, fresh] = idle_since_.emplace(w.id, now);
    if (w.busy_slots > 0) it->second = now;
    w.idle_since = it->second;
  }
  for (auto it = idle_since_.begin(); it != idle_since_.end();) {
    it = seen.count(it->first) ? std::next(it) : idle_since_.erase(it);
  }
  for (auto it = removing_.begin(); it != removing_.end();) {
    it = seen.count(*it) ? std::next(it) : removing_.erase(it);
  }
  for (scheduler::PoolWorker& w : *workers) w.draining = w.draining || removing_.count(w.id) > 0;
  for (auto it = pools_.begin(); it != pools_.end();) {
    it = by_name.count(it->first) || it->second.in_flight ? std::next(it) : pools_.erase(it);
  }
}

std::map<std::string, scheduler::PoolProvisioning> PoolAutoscaler::Provisioning(
    const PoolsByName& by_name, const Snapshot& snapshot, absl::Time now) {
  std::map<std::string, scheduler::PoolProvisioning> provisioning;
  for (const auto& [name, pool] : by_name) {
    PoolRuntime& runtime = pools_[name];
    const std::string bytes = pool->spec().SerializeAsString();
    if (runtime.provisioner == nullptr || runtime.spec_bytes != bytes) {
      runtime.provisioner = MakeProvisioner(pool->spec(), &cancel_calls_);
      runtime.spec_bytes = bytes;
    }
    const int n = snapshot.Live(name);
    if (runtime.expected_workers > 0 && n >= runtime.expected_workers) {
      runtime.expected_workers = 0;  // all joined
    } else if (runtime.expected_workers > 0 && now > runtime.expect_until) {
      runtime.last_error =
          absl::StrCat(runtime.expected_workers - n, " provisioned workers did not join within ",
                       absl::FormatDuration(options_.join_timeout));
      runtime.last_error_at = now;
      runtime.expected_workers = 0;
    }
    scheduler::PoolProvisioning& p = provisioning[name];
    p.pending_workers = std::max(0, runtime.expected_workers - n);
    p.call_in_flight = runtime.in_flight;
    p.backoff_until = runtime.backoff_until;
    p.last_error = runtime.last_error;
  }
  return provisioning;
}

void PoolAutoscaler::StartScaleUps(
    const scheduler::AutoscalePlan& plan, const Snapshot& snapshot,
    const std::map<std::string, scheduler::PoolProvisioning>& provisioning, absl::Time now,
    std::map<std::string, std::string>* notes) {
  for (const scheduler::ScaleUp& up : plan.scale_ups) {
    PoolRuntime& runtime = pools_[up.pool];
    if (!runtime.provisioner->Elastic()) continue;
    const auto pending = provisioning.find(up.pool);
    const int before = snapshot.Live(up.pool) +
                       (pending == provisioning.end() ? 0 : pending->second.pending_workers);
    runtime.expected_workers = before + up.count;
    runtime.expect_until = now + options_.join_timeout;
    for (const std::string& job : up.job_ids) {
      (*notes)[job] = absl::StrCat("pool ", up.pool, " is starting ", up.count,
                                   up.count == 1 ? " worker" : " workers");
    }
    std::shared_ptr<Provisioner> provisioner = runtime.provisioner;
    const std::string pool = up.pool;
    const int count = up.count;
    Launch(
        pool,
        absl::StrCat("scale up by ", count,
                     up.job_ids.empty() ? " (min_workers)"
                                        : absl::StrCat(" for ", absl::StrJoin(up.job_ids, ", "))),
        [provisioner, pool, count] { return provisioner->ScaleUp(pool, count); },
        [this, pool](const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          if (!status.ok()) pools_[pool].expected_workers = 0;  // nothing is coming
        });
  }
}

void PoolAutoscaler::ObserveAndWithdraw(
    const scheduler::AutoscalePlan& plan, const PoolsByName& by_name,
    const std::map<std::string, scheduler::PoolProvisioning>& provisioning,
    const Snapshot& snapshot, std::map<std::string, std::string>* notes) {
  for (const auto& [name, p] : provisioning) {
    PoolRuntime& runtime = pools_[name];
    const int waiting = plan.waiting_jobs.count(name) ? plan.waiting_jobs.at(name) : 0;
    const int workers = snapshot.Live(name);
    runtime.observed.set_workers(workers);
    int busy = 0;
    for (const scheduler::PoolWorker& w : snapshot.workers) {
      busy += w.pool == name && w.busy_slots > 0;
    }
    runtime.observed.set_busy_workers(busy);
    runtime.observed.set_pending_workers(std::max(0, runtime.expected_workers - workers));
    runtime.observed.set_waiting_jobs(waiting);
    // Jobs waiting for pending workers say so; pending workers nobody waits for are withdrawn.
    if (p.pending_workers > 0) {
      for (const scheduler::PoolJob& job : snapshot.jobs) {
        if (job.pool == name && !notes->count(job.id)) {
          (*notes)[job.id] = absl::StrCat("waiting for ", p.pending_workers, " starting ",
                                          p.pending_workers == 1 ? "worker" : "workers",
                                          " of pool ", name, " to join");
        }
      }
    }
    if (waiting == 0 && p.pending_workers > 0 && !runtime.in_flight &&
        runtime.provisioner->Elastic() && workers >= by_name.at(name)->spec().min_workers()) {
      std::shared_ptr<Provisioner> provisioner = runtime.provisioner;
      const std::string pool = name;
      runtime.expected_workers = 0;
      Launch(
          pool, absl::StrCat("withdraw ", p.pending_workers, " pending workers (no job waits)"),
          [provisioner, pool] { return provisioner->CancelPending(pool); },
          [](const absl::Status&) {});
    }
  }
}

PoolAutoscaler::RemovalsByPool PoolAutoscaler::ConfirmRemovals(
    RemovalsByPool to_remove, const std::vector<scheduler::PoolJob>& jobs,
    std::map<std::string, std::string> notes) {
  // Checked idle again and drained under the coordinator's lock, so nothing is placed on them
  // between this decision and the provisioner's call.
  RemovalsByPool confirmed;
  for (auto& [pool, list] : to_remove) {
    std::vector<std::string> ids;
    for (const ProvisionedWorker& w : list) ids.push_back(w.id);
    const std::vector<std::string> retired = coordinator_.RetireIdle(ids);
    const std::set<std::string> keep(retired.begin(), retired.end());
    for (ProvisionedWorker& w : list) {
      if (keep.count(w.id)) confirmed[pool].push_back(std::move(w));
    }
  }
  std::vector<std::string> considered;
  for (const scheduler::PoolJob& job : jobs) considered.push_back(job.id);
  coordinator_.SetPoolNotes(considered, std::move(notes));
  return confirmed;
}

void PoolAutoscaler::StartScaleDown(const std::string& pool, std::vector<ProvisionedWorker> list) {
  std::shared_ptr<Provisioner> provisioner = pools_[pool].provisioner;
  std::vector<std::string> names;
  for (const ProvisionedWorker& w : list) names.push_back(w.name);
  for (const ProvisionedWorker& w : list) removing_.insert(w.id);
  Launch(
      pool, absl::StrCat("scale down: ", absl::StrJoin(names, ", "), " idle"),
      [this, provisioner, pool, list] {
        absl::Status status = provisioner->ScaleDown(pool, list);
        if (!status.ok()) {
          // Not removed: they take placements again (unless an operator drained them).
          std::vector<std::string> ids;
          for (const ProvisionedWorker& w : list) ids.push_back(w.id);
          coordinator_.Unretire(ids);
        }
        return status;
      },
      [this, list](const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (!status.ok()) {
          for (const ProvisionedWorker& w : list) removing_.erase(w.id);
        }
      });
}

v1::PoolStatus PoolAutoscaler::StatusOf(const std::string& pool) {
  absl::MutexLock lock(&mu_);
  auto it = pools_.find(pool);
  if (it == pools_.end()) return v1::PoolStatus();
  const PoolRuntime& runtime = it->second;
  v1::PoolStatus status = runtime.observed;
  status.set_last_error(runtime.last_error);
  if (!runtime.last_error.empty()) SetTime(runtime.last_error_at, status.mutable_last_error_at());
  if (runtime.backoff_until > absl::Now()) {
    SetTime(runtime.backoff_until, status.mutable_backoff_until());
  }
  status.set_last_action(runtime.last_action);
  return status;
}

}  // namespace gantry::server
