#include "scheduler/scheduler.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gantry::scheduler {
namespace {

using gantry::v1::DeviceKind;

DeviceKind Normalized(DeviceKind device) {
  return device == gantry::v1::DEVICE_KIND_UNSPECIFIED ? gantry::v1::DEVICE_KIND_CPU : device;
}

const char* DeviceName(DeviceKind device) {
  return Normalized(device) == gantry::v1::DEVICE_KIND_GPU ? "GPU" : "CPU";
}

// Jobs with equal keys match exactly the same workers.
std::string RequirementKey(const JobRequest& job) {
  std::string key = absl::StrCat(static_cast<int>(Normalized(job.device)));
  for (const auto& [k, v] : job.selector) absl::StrAppend(&key, "\n", k, "=", v);
  return key;
}

// "device CPU and pool=onprem, zone=a"
std::string Describe(const JobRequest& job) {
  std::string text = absl::StrCat("device ", DeviceName(job.device));
  if (!job.selector.empty()) {
    absl::StrAppend(&text, " and ", absl::StrJoin(job.selector, ", ", absl::PairFormatter("=")));
  }
  return text;
}

std::string Slots(int n) { return absl::StrCat(n, n == 1 ? " slot" : " slots"); }

}  // namespace

Scheduler::Scheduler(SchedulerOptions options) : options_(options) {}

bool Scheduler::Matches(const Worker& worker, const JobRequest& job) {
  if (Normalized(worker.state.device) != Normalized(job.device)) return false;
  for (const auto& [key, value] : job.selector) {
    auto it = worker.state.labels.find(key);
    if (it == worker.state.labels.end() || it->second != value) return false;
  }
  return true;
}

int Scheduler::Usable(const Worker& worker) {
  int by_leases = worker.state.slots - worker.leased;
  int by_report = worker.reported_free - worker.placed_since_report;
  return std::max(0, std::min(by_leases, by_report));
}

bool Scheduler::Placeable(const Worker& worker, absl::Time now) const {
  return worker.connected && !worker.lost && !worker.draining &&
         now - worker.last_heartbeat <= options_.lease_timeout;
}

bool Scheduler::SetDraining(const std::string& worker_id, bool draining) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return false;
  it->second.draining = draining;
  return true;
}

int Scheduler::FreePort(const Worker& worker) {
  // At most one leased port per job whose rank 0 runs here, so this loop is short.
  for (int port = worker.state.port_min; port <= worker.state.port_max; ++port) {
    if (worker.leased_ports.count(port) == 0) return port;
  }
  return -1;
}

void Scheduler::UpsertWorker(const WorkerState& worker, absl::Time now) {
  auto [it, inserted] = workers_.try_emplace(worker.id);
  Worker& w = it->second;
  w.state = worker;
  w.state.device = Normalized(worker.device);
  if (inserted) w.reported_free = worker.slots;
  w.connected = true;
  w.lost = false;
  w.last_heartbeat = now;
}

absl::Status Scheduler::Heartbeat(const std::string& worker_id, int reported_free_slots,
                                  const std::set<std::string>& cached_datasets, absl::Time now) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("worker ", worker_id, " is not registered"));
  }
  Worker& w = it->second;
  w.connected = true;
  w.lost = false;
  w.last_heartbeat = now;
  w.reported_free = std::max(0, reported_free_slots);
  w.placed_since_report = 0;
  w.placed_since_jobs.clear();
  w.state.cached_datasets = cached_datasets;
  return absl::OkStatus();
}

void Scheduler::MarkDisconnected(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) it->second.connected = false;
}

absl::Status Scheduler::Submit(const JobRequest& job) {
  if (job.id.empty()) return absl::InvalidArgumentError("a job needs an id");
  if (job.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job.id, ": world_size must be at least 1, got ", job.world_size));
  }
  auto [it, inserted] = jobs_.try_emplace(job.id);
  if (!inserted) return absl::OkStatus();  // already queued or placed: left alone
  it->second.request = job;
  it->second.request.device = Normalized(job.device);
  queue_.insert(QueueKey{job.priority, job.submitted, job.id});
  return absl::OkStatus();
}

bool Scheduler::Remove(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return false;
  Job& job = it->second;
  if (job.placed) {
    Release(job);
  } else {
    queue_.erase(QueueKey{job.request.priority, job.request.submitted, job.request.id});
  }
  jobs_.erase(it);
  return true;
}

void Scheduler::Lease(Job& job, const Placement& placement, bool count_as_new) {
  std::map<std::string, int> ranks;
  for (const std::string& worker_id : placement.rank_workers) ++ranks[worker_id];
  for (const auto& [worker_id, n] : ranks) {
    Worker& w = workers_.at(worker_id);
    w.leased += n;
    if (count_as_new) {
      w.placed_since_report += n;
      w.placed_since_jobs[job.request.id] = n;
    }
    w.job_ranks[job.request.id] = n;
  }
  if (placement.rendezvous_port > 0) {
    workers_.at(placement.rank_workers[0]).leased_ports[placement.rendezvous_port] = job.request.id;
  }
  job.placed = true;
  job.placement = placement;
  job.port_blocked_on.clear();
  job.over_quota = false;
  job.reserved_workers.clear();
  job.reserved_behind.clear();
  const int slots = static_cast<int>(placement.rank_workers.size());
  tenant_slots_[job.request.tenant] += slots;
  tenant_pool_slots_[{job.request.tenant, PoolOf(job.request)}] += slots;
}

void Scheduler::Release(Job& job) {
  const Placement& placement = job.placement;
  for (const std::string& worker_id : placement.rank_workers) {
    auto w = workers_.find(worker_id);
    if (w == workers_.end()) continue;
    auto ranks = w->second.job_ranks.find(job.request.id);
    if (ranks == w->second.job_ranks.end()) continue;  // already released (a repeated worker id)
    w->second.leased -= ranks->second;
    w->second.job_ranks.erase(ranks);
    // Placed after the worker's last report and released before its next one: the report never
    // counted these ranks, so they stop bounding it.
    auto since = w->second.placed_since_jobs.find(job.request.id);
    if (since != w->second.placed_since_jobs.end()) {
      w->second.placed_since_report -= since->second;
      w->second.placed_since_jobs.erase(since);
    }
  }
  if (!placement.rank_workers.empty() && placement.rendezvous_port > 0) {
    auto w = workers_.find(placement.rank_workers[0]);
    if (w != workers_.end()) {
      auto port = w->second.leased_ports.find(placement.rendezvous_port);
      if (port != w->second.leased_ports.end() && port->second == job.request.id) {
        w->second.leased_ports.erase(port);
      }
    }
  }
  job.placed = false;
  const int slots = static_cast<int>(placement.rank_workers.size());
  if (auto it = tenant_slots_.find(job.request.tenant); it != tenant_slots_.end()) {
    if ((it->second -= slots) <= 0) tenant_slots_.erase(it);
  }
  if (auto it = tenant_pool_slots_.find({job.request.tenant, PoolOf(job.request)});
      it != tenant_pool_slots_.end()) {
    if ((it->second -= slots) <= 0) tenant_pool_slots_.erase(it);
  }
}

bool Scheduler::TryPlace(Job& job, const std::vector<Worker*>& candidates, Placement* out) {
  struct Candidate {
    bool cached;
    int free;
    Worker* worker;
  };
  const JobRequest& request = job.request;
  // A heap with the best candidate on top: cached first, then most free slots, then worker id.
  // Popping only as many as the gang needs keeps a placement O(candidates + k log candidates).
  auto worse = [](const Candidate& a, const Candidate& b) {
    if (a.cached != b.cached) return b.cached;
    if (a.free != b.free) return a.free < b.free;
    return a.worker->order > b.worker->order;
  };
  // Workers that would host rank 0 but have no free rendezvous port are left out and the choice is
  // made again (a few times at most: ports run out only when a range is smaller than the slots).
  std::vector<const Worker*> portless;
  constexpr int kAttempts = 4;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::vector<Candidate> usable;
    usable.reserve(candidates.size());
    long total = 0;
    for (Worker* w : candidates) {
      int free = Usable(*w);
      if (free <= 0 || w->reserved) continue;
      if (std::find(portless.begin(), portless.end(), w) != portless.end()) continue;
      bool cached =
          !request.dataset_key.empty() && w->state.cached_datasets.count(request.dataset_key) > 0;
      usable.push_back({cached, free, w});
      total += free;
    }
    if (total < request.world_size) break;
    std::make_heap(usable.begin(), usable.end(), worse);
    std::vector<std::pair<Worker*, int>> chosen;  // worker, ranks of the job on it
    int need = request.world_size;
    while (need > 0) {
      std::pop_heap(usable.begin(), usable.end(), worse);
      const Candidate& best = usable.back();
      int take = std::min(need, best.free);
      chosen.emplace_back(best.worker, take);
      need -= take;
      usable.pop_back();
    }
    // Rank 0 on the worker with the most ranks (it hosts the rendezvous); among equals, the first
    // one chosen that has a free port.
    std::stable_sort(chosen.begin(), chosen.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    int port = -1;
    size_t rank0 = 0;
    for (; rank0 < chosen.size() && chosen[rank0].second == chosen[0].second; ++rank0) {
      port = FreePort(*chosen[rank0].first);
      if (port >= 0) break;
      portless.push_back(chosen[rank0].first);
    }
    if (port < 0) continue;
    std::rotate(chosen.begin(), chosen.begin() + rank0, chosen.begin() + rank0 + 1);
    out->job_id = request.id;
    out->rank_workers.clear();
    out->rank_workers.reserve(request.world_size);
    for (const auto& [worker, n] : chosen) {
      out->rank_workers.insert(out->rank_workers.end(), n, worker->state.id);
    }
    out->rendezvous_host = chosen[0].first->state.host;
    out->rendezvous_port = port;
    return true;
  }
  if (!portless.empty()) job.port_blocked_on = portless.front()->state.id;
  return false;
}

// What one Schedule round knows besides the workers and jobs.
struct Scheduler::Round {
  // Placeable workers by device kind, with or without free slots (reservations count full ones).
  std::map<DeviceKind, std::vector<Worker*>> placeable_by_device;
  long total_free = 0;  // usable slots outside reservations
  // Per requirement (device + selector): the placeable matching workers; the smallest gang that
  // did not fit this round (any gang at least as large cannot fit either, as slots only get taken
  // or reserved); the smallest gang that could not reserve; whether a reservation was made.
  std::unordered_map<std::string, std::vector<Worker*>> matching;
  std::unordered_map<std::string, int> smallest_unfit;
  std::unordered_map<std::string, int> smallest_unreservable;
  std::set<std::string> reserved_requirements;
  std::vector<Reservation> reservations;
  // Per requirement: the job whose reservation holds one of its workers, and how many
  // reservations there were when that was looked up.
  std::unordered_map<std::string, std::pair<size_t, std::string>> behind;
};

std::string Scheduler::PoolOf(const JobRequest& job) {
  auto it = job.selector.find("pool");
  return it == job.selector.end() ? std::string() : it->second;
}

const TenantPolicy& Scheduler::PolicyOf(const std::string& tenant) const {
  static const TenantPolicy kDefault;
  auto it = policies_.find(tenant);
  return it == policies_.end() ? kDefault : it->second;
}

int Scheduler::QuotaOf(const JobRequest& job) const {
  const TenantPolicy& policy = PolicyOf(job.tenant);
  auto it = policy.max_slots_per_pool.find(PoolOf(job));
  return it == policy.max_slots_per_pool.end() ? 0 : it->second;
}

absl::Status Scheduler::SetTenantPolicies(std::map<std::string, TenantPolicy> policies) {
  for (const auto& [tenant, policy] : policies) {
    if (!(policy.weight > 0) || !std::isfinite(policy.weight)) {
      return absl::InvalidArgumentError(absl::StrCat("tenant ", tenant, ": weight ", policy.weight,
                                                     " must be a positive finite number"));
    }
    for (const auto& [pool, quota] : policy.max_slots_per_pool) {
      if (quota < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tenant ", tenant, ": quota ", quota, " on pool ", pool, " is negative"));
      }
    }
  }
  policies_ = std::move(policies);
  return absl::OkStatus();
}

int Scheduler::TenantSlots(const std::string& tenant,
                           const std::optional<std::string>& pool) const {
  if (!pool.has_value()) {
    auto it = tenant_slots_.find(tenant);
    return it == tenant_slots_.end() ? 0 : it->second;
  }
  auto it = tenant_pool_slots_.find({tenant, *pool});
  return it == tenant_pool_slots_.end() ? 0 : it->second;
}

bool Scheduler::Reserve(Job& job, const std::vector<Worker*>& workers, long* total_free,
                        std::vector<Reservation>* reservations) {
  std::vector<Worker*> open;
  long capacity = 0;
  for (Worker* w : workers) {
    if (w->reserved) continue;
    open.push_back(w);
    capacity += w->state.slots;
  }
  const int need = job.request.world_size;
  if (capacity < need) return false;
  std::sort(open.begin(), open.end(), [](const Worker* a, const Worker* b) {
    int free_a = Usable(*a), free_b = Usable(*b);
    if (free_a != free_b) return free_a > free_b;
    if (a->state.slots != b->state.slots) return a->state.slots > b->state.slots;
    return a->order < b->order;
  });
  Reservation reservation{job.request.id, need, {}};
  long reserved = 0;
  for (Worker* w : open) {
    if (reserved >= need) break;
    w->reserved = true;
    *total_free -= Usable(*w);
    reserved += w->state.slots;
    reservation.workers.push_back(w);
    job.reserved_workers.push_back(w->state.id);
  }
  reservations->push_back(std::move(reservation));
  return true;
}

bool Scheduler::Consider(Job& job, Round& round, Placement* placement) {
  job.port_blocked_on.clear();
  job.over_quota = false;
  job.reserved_workers.clear();
  job.reserved_behind.clear();
  const JobRequest& request = job.request;
  if (int quota = QuotaOf(request);
      quota > 0 && TenantSlots(request.tenant, PoolOf(request)) + request.world_size > quota) {
    job.over_quota = true;
    return false;
  }
  std::string requirement = RequirementKey(request);
  auto [workers, inserted] = round.matching.try_emplace(requirement);
  if (inserted) {
    for (Worker* w : round.placeable_by_device[request.device]) {
      if (Matches(*w, request)) workers->second.push_back(w);
    }
  }
  auto unfit = round.smallest_unfit.find(requirement);
  if (request.world_size <= round.total_free &&
      (unfit == round.smallest_unfit.end() || request.world_size < unfit->second)) {
    if (TryPlace(job, workers->second, placement)) {
      Lease(job, *placement, /*count_as_new=*/true);
      round.total_free -= request.world_size;
      return true;
    }
    if (!job.port_blocked_on.empty()) return false;
    int& smallest = round.smallest_unfit.try_emplace(requirement, request.world_size).first->second;
    smallest = std::min(smallest, request.world_size);
  }
  if (!round.reservations.empty()) {
    auto& behind = round.behind[requirement];
    if (behind.first != round.reservations.size()) {
      behind = {round.reservations.size(), ""};
      for (const Reservation& r : round.reservations) {
        for (const Worker* w : r.workers) {
          if (Matches(*w, request)) {
            behind.second = r.job_id;
            break;
          }
        }
        if (!behind.second.empty()) break;
      }
    }
    job.reserved_behind = behind.second;
  }
  // A single rank needs no reservation: any slot that frees fits it.
  if (options_.reservations && request.world_size > 1 &&
      !round.reserved_requirements.count(requirement)) {
    auto unreservable = round.smallest_unreservable.find(requirement);
    if (unreservable == round.smallest_unreservable.end() ||
        request.world_size < unreservable->second) {
      if (Reserve(job, workers->second, &round.total_free, &round.reservations)) {
        round.reserved_requirements.insert(requirement);
        return false;
      }
      int& smallest =
          round.smallest_unreservable.try_emplace(requirement, request.world_size).first->second;
      smallest = std::min(smallest, request.world_size);
    }
  }
  return false;
}

std::vector<Placement> Scheduler::Schedule(absl::Time now) {
  std::vector<Placement> placements;
  Round round;
  int order = 0;
  for (auto& [id, w] : workers_) {
    w.order = order++;
    w.reserved = false;
    if (!Placeable(w, now)) continue;
    round.placeable_by_device[w.state.device].push_back(&w);
    round.total_free += Usable(w);
  }
  // A tenant's queued jobs of one priority level, in queue order, and the next one to consider.
  struct TenantQueue {
    std::string tenant;
    double weight = 1;
    std::vector<const QueueKey*> jobs;
    size_t next = 0;
  };
  // The fair-share order: lowest slots held / weight, then the older next job.
  struct Turn {
    double share;
    const QueueKey* next;
    size_t queue;
    bool operator<(const Turn& o) const {
      if (share != o.share) return share < o.share;
      if (*next < *o.next || *o.next < *next) return *next < *o.next;
      return queue < o.queue;
    }
  };
  std::vector<QueueKey> placed_keys;
  auto level = queue_.begin();
  while (level != queue_.end()) {
    const int priority = level->priority;
    std::vector<TenantQueue> queues;
    std::unordered_map<std::string, size_t> queue_of;
    for (; level != queue_.end() && level->priority == priority; ++level) {
      const std::string& tenant = jobs_.at(level->id).request.tenant;
      auto [it, inserted] = queue_of.try_emplace(tenant, queues.size());
      if (inserted) queues.push_back({tenant, PolicyOf(tenant).weight, {}, 0});
      queues[it->second].jobs.push_back(&*level);
    }
    auto share = [this](const TenantQueue& q) {
      auto it = tenant_slots_.find(q.tenant);
      return (it == tenant_slots_.end() ? 0.0 : it->second) / q.weight;
    };
    std::set<Turn> turns;
    for (size_t i = 0; i < queues.size(); ++i)
      turns.insert({share(queues[i]), queues[i].jobs[0], i});
    while (!turns.empty()) {
      const size_t index = turns.begin()->queue;
      turns.erase(turns.begin());
      TenantQueue& queue = queues[index];
      const QueueKey& key = *queue.jobs[queue.next++];
      Placement placement;
      if (Consider(jobs_.at(key.id), round, &placement)) {
        placed_keys.push_back(key);
        placements.push_back(std::move(placement));
      }
      if (queue.next < queue.jobs.size()) {
        turns.insert({share(queue), queue.jobs[queue.next], index});
      }
    }
  }
  for (const QueueKey& key : placed_keys) queue_.erase(key);
  return placements;
}

std::vector<LostWorker> Scheduler::ExpireLeases(absl::Time now) {
  std::vector<LostWorker> lost;
  // First find every lost worker with all the jobs it hosts, then release: a job spanning two lost
  // workers is listed under both.
  for (auto& [id, w] : workers_) {
    if (w.lost || now - w.last_heartbeat <= options_.lease_timeout) continue;
    w.lost = true;
    LostWorker report;
    report.worker_id = id;
    for (const auto& [job_id, ranks] : w.job_ranks) report.job_ids.push_back(job_id);
    lost.push_back(std::move(report));
  }
  for (const LostWorker& report : lost) {
    for (const std::string& job_id : report.job_ids) {
      auto job = jobs_.find(job_id);
      if (job == jobs_.end()) continue;  // released with an earlier lost worker
      Release(job->second);
      jobs_.erase(job);
    }
  }
  return lost;
}

absl::Status Scheduler::Adopt(const Placement& placement) {
  if (placement.job_id.empty())
    return absl::InvalidArgumentError("an adopted placement needs a job id");
  if (placement.rank_workers.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("adopted placement of job ", placement.job_id, " has no ranks"));
  }
  auto existing = jobs_.find(placement.job_id);
  if (existing != jobs_.end() && existing->second.placed) {
    const Placement& held = existing->second.placement;
    if (held.rank_workers == placement.rank_workers &&
        held.rendezvous_port == placement.rendezvous_port) {
      return absl::OkStatus();
    }
    return absl::FailedPreconditionError(
        absl::StrCat("job ", placement.job_id, " is already placed differently"));
  }
  std::map<std::string, int> ranks;
  for (const std::string& worker_id : placement.rank_workers) ++ranks[worker_id];
  for (const auto& [worker_id, n] : ranks) {
    auto w = workers_.find(worker_id);
    if (w == workers_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", placement.job_id, ": worker ", worker_id, " is not registered"));
    }
    if (w->second.lost) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", placement.job_id, ": worker ", worker_id, " is lost"));
    }
    int free = w->second.state.slots - w->second.leased;
    if (free < n) {
      return absl::FailedPreconditionError(absl::StrCat("job ", placement.job_id, " needs ",
                                                        Slots(n), " on worker ", worker_id, ", ",
                                                        free, " free"));
    }
  }
  if (placement.rendezvous_port > 0) {
    const Worker& w0 = workers_.at(placement.rank_workers[0]);
    auto port = w0.leased_ports.find(placement.rendezvous_port);
    if (port != w0.leased_ports.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", placement.job_id, ": rendezvous port ", placement.rendezvous_port,
                       " on worker ", placement.rank_workers[0], " is leased to ", port->second));
    }
  }
  if (existing == jobs_.end()) {
    existing = jobs_.try_emplace(placement.job_id).first;
    existing->second.request.id = placement.job_id;
    existing->second.request.world_size = static_cast<int>(placement.rank_workers.size());
  } else {
    const JobRequest& r = existing->second.request;
    queue_.erase(QueueKey{r.priority, r.submitted, r.id});
  }
  // The worker's own heartbeat already counts these running ranks as busy.
  Lease(existing->second, placement, /*count_as_new=*/false);
  return absl::OkStatus();
}

int Scheduler::FreeSlots(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.lost || !it->second.connected) return 0;
  return Usable(it->second);
}

int Scheduler::LeasedSlots(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? 0 : it->second.leased;
}

std::vector<std::string> Scheduler::QueuedJobs() const {
  std::vector<std::string> ids;
  ids.reserve(queue_.size());
  for (const QueueKey& key : queue_) ids.push_back(key.id);
  return ids;
}

std::vector<JobRequest> Scheduler::QueuedRequests() const {
  std::vector<JobRequest> requests;
  requests.reserve(queue_.size());
  for (const QueueKey& key : queue_) {
    // A job held back by its tenant's quota is no demand for more workers.
    if (auto it = jobs_.find(key.id); it != jobs_.end() && !it->second.over_quota) {
      requests.push_back(it->second.request);
    }
  }
  return requests;
}

bool Scheduler::Live(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && it->second.connected && !it->second.lost;
}

std::vector<std::string> Scheduler::PlacedJobs() const {
  std::vector<std::string> ids;
  for (const auto& [id, job] : jobs_) {
    if (job.placed) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::optional<Placement> Scheduler::PlacementOf(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second.placed) return std::nullopt;
  return it->second.placement;
}

std::string Scheduler::WaitReason(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.placed) return "";
  const Job& job = it->second;
  const JobRequest& request = job.request;
  if (int quota = QuotaOf(request); quota > 0) {
    const std::string pool = PoolOf(request);
    const std::string tenant = request.tenant.empty() ? std::string("\"\"") : request.tenant;
    if (request.world_size > quota) {
      return absl::StrCat("tenant ", tenant, " may hold at most ", Slots(quota), " on pool ", pool,
                          " and this job needs ", request.world_size,
                          "; it cannot run until an admin raises the quota "
                          "(gantry admin tenants limits set)");
    }
    int held = TenantSlots(request.tenant, pool);
    if (held + request.world_size > quota) {
      return absl::StrCat("waiting: tenant ", tenant, " holds ", held, " of its ", Slots(quota),
                          " on pool ", pool, "; this job needs ", request.world_size);
    }
  }
  int registered = 0, unavailable = 0, draining = 0;
  long capacity = 0, free = 0;
  for (const auto& [id, w] : workers_) {
    if (!Matches(w, request)) continue;
    ++registered;
    if (w.lost || !w.connected) {
      ++unavailable;
      continue;
    }
    if (w.draining) {
      ++draining;
      continue;
    }
    capacity += w.state.slots;
    free += Usable(w);
  }
  const std::string what = Describe(request);
  const int n = request.world_size;
  if (registered == 0) {
    return absl::StrCat("no registered worker matches ", what, "; it cannot run until one joins");
  }
  if (capacity < n) {
    std::string text =
        absl::StrCat("needs ", Slots(n), " matching ", what,
                     " but the connected matching workers have ", capacity, " in total");
    if (unavailable > 0) {
      absl::StrAppend(&text, " (", unavailable,
                      unavailable == 1 ? " matching worker is" : " matching workers are",
                      " disconnected or lost)");
    }
    if (draining > 0) {
      absl::StrAppend(&text, " (", draining,
                      draining == 1 ? " matching worker is" : " matching workers are",
                      " draining)");
    }
    absl::StrAppend(&text, "; it cannot run until more join");
    return text;
  }
  if (free < n) {
    std::string text = absl::StrCat("waiting for ", n, " free ", n == 1 ? "slot" : "slots",
                                    " matching ", what, " (", free, " free)");
    if (!job.reserved_workers.empty()) {
      absl::StrAppend(&text, "; ", job.reserved_workers.size(),
                      job.reserved_workers.size() == 1 ? " worker is" : " workers are",
                      " reserved for it, so smaller jobs do not take their slots as they free up");
    }
    return text;
  }
  if (!job.reserved_behind.empty()) {
    return absl::StrCat(free, " free slots match ", what, " but they are reserved for ",
                        job.reserved_behind, ", a larger job ahead of this one");
  }
  if (!job.port_blocked_on.empty()) {
    auto w = workers_.find(job.port_blocked_on);
    std::string range = w == workers_.end()
                            ? std::string("its range")
                            : absl::StrCat(w->second.state.port_min, "-", w->second.state.port_max);
    return absl::StrCat(free, " free slots match ", what, " but worker ", job.port_blocked_on,
                        " has no free rendezvous port in ", range);
  }
  return absl::StrCat(free, " free slots match ", what,
                      "; it is placed at the next scheduling round");
}

}  // namespace gantry::scheduler
