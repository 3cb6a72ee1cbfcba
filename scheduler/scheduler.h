// A Scheduler keeps the job queue and places jobs as gangs on worker slots, with heartbeat leases.
//
// Pure logic: no I/O, no clock of its own (every time is passed in), no threads. The server owns
// the single instance and calls it under its own mutex; the Scheduler is NOT thread-safe.
//
// Slots and leases. A worker offers `slots` ranks. A placed job holds a lease on every slot its
// ranks use, and on one rendezvous port of its rank-0 worker; leases end with Remove (job finished,
// cancelled or failed) or when ExpireLeases finds one of the job's workers silent. What can be
// placed on a worker is bounded twice: by its slots minus the leased ones, and by the free slots
// the worker itself reported in its last heartbeat minus the slots of jobs placed on it since then
// and still leased (the report could not count those), so ranks the scheduler does not know of
// (e.g. started before a server restart) are never double-booked, not even between two heartbeats.
// A job placed before the last report and removed since frees its slots at the worker's next
// heartbeat.
//
// Order. Jobs are taken by priority (higher first). Among jobs of equal priority the order is fair
// share between tenants, recomputed after every placement: the next job is the oldest queued job
// (submitted, then id) of the tenant whose slots held now divided by its weight is the lowest
// (ties: the tenant whose next job is older). Slots held are the slots leased to the tenant's
// placed jobs in every pool, at this moment: no decayed history, so a server restart loses nothing
// and a tenant's past use never holds it back once its jobs end. A tenant alone gets every free
// slot (the order only decides who goes first; nothing is held back for absent tenants).
//
// Quotas. A job whose tenant already holds `q` slots of its quota `Q` on the job's pool (the
// selector's "pool") is skipped while q + world_size > Q; it blocks nobody, its message says so.
//
// Gangs and reservations. A job starts only when `world_size` matching slots are free at once and
// never partially. When a job does not fit, jobs behind it may still start (backfill), except on
// its reservation: with options.reservations, the first gang (world_size > 1) of each requirement
// (device + selector) that does not fit in this order reserves matching workers, taken by most
// usable slots now, then most slots, then id, until their slots add up to its world_size (without
// runtime estimates the workers with the most free slots are the best guess of those that free
// soonest). No other job of the same or lower rank is placed on a reserved worker in that round
// (conservative backfill: a backfilled job uses only unreserved slots), so as ranks end the
// reserved workers empty until the gang fits. Reservations are made again every round. A job whose
// matching workers cannot hold it even when empty reserves nothing (it would idle them for good).
// Jobs waiting on their quota or a rendezvous port reserve nothing either. WaitReason says what a
// job waits for.
#ifndef GANTRY_SCHEDULER_SCHEDULER_H_
#define GANTRY_SCHEDULER_SCHEDULER_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "scheduler/types.h"

namespace gantry::scheduler {

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options);

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Adds or updates a worker (registration or reconnect). Existing leases on it are kept. Marks it
  // connected and alive with last heartbeat = now. A new worker is assumed to have all its slots
  // free until its first heartbeat says otherwise; an existing one keeps its last reported free
  // slots.
  void UpsertWorker(const WorkerState& worker, absl::Time now);

  // A heartbeat: the worker is connected and alive at `now`; reported_free_slots (negative = 0)
  // bounds what can be placed on it: usable = min(slots - leased, reported_free_slots - placed
  // since this heartbeat). cached_datasets replaces the set. NOT_FOUND for an unknown worker.
  absl::Status Heartbeat(const std::string& worker_id, int reported_free_slots,
                         const std::set<std::string>& cached_datasets, absl::Time now);

  // The worker's stream ended: no new placements on it until the next UpsertWorker/Heartbeat; its
  // leases stay until ExpireLeases decides. Unknown ids are ignored.
  void MarkDisconnected(const std::string& worker_id);

  // A draining worker (drained by an operator, or preempted) gets no new placements; its leases
  // stay. Kept across UpsertWorker and heartbeats until undrained. false for an unknown worker.
  bool SetDraining(const std::string& worker_id, bool draining);

  // Replaces every tenant's policy; tenants absent from `policies` get TenantPolicy{} (weight 1,
  // no quota). INVALID_ARGUMENT (and nothing changes) for a weight that is not a positive finite
  // number or a negative quota. Takes effect at the next Schedule; placed jobs are never undone.
  absl::Status SetTenantPolicies(std::map<std::string, TenantPolicy> policies);

  // Queues a job (idempotent by id: a job already queued or placed is left alone and OK is
  // returned). INVALID_ARGUMENT for an empty id or world_size < 1.
  absl::Status Submit(const JobRequest& job);

  // Removes a queued job or releases a placed one's leases (slots and port); false when unknown.
  bool Remove(const std::string& job_id);

  // Places queued jobs in the order above as long as they fit, quotas allow and reservations leave
  // room (see the top of this file). Only connected workers heard from within lease_timeout of
  // `now` and not lost are used. Matching: device kind equal (UNSPECIFIED = CPU), selector pairs
  // among the labels. Choice of slots: workers caching job.dataset_key first, then most usable
  // matching slots first (packs the gang onto as few workers as possible), ties by worker id. Ranks
  // are numbered worker by worker; rank 0 goes to the worker with the most ranks of the job (ties:
  // the first one chosen that has a free rendezvous port). A worker that would host rank 0 but has
  // no free port is left out and the choice made again (up to 4 times); failing that the job waits
  // for the next round. The rendezvous port is the lowest port of that worker's range not
  // leased to another placed job.
  std::vector<Placement> Schedule(absl::Time now);

  // Workers not lost whose last heartbeat is older than lease_timeout at `now` become lost: no
  // placements on them until they heartbeat or upsert again; every job with a rank on them has ALL
  // its leases (on every worker) released and is forgotten (the server fails it). Each lost worker
  // is reported once per loss, with an empty job list when it ran nothing. Sorted by worker id.
  std::vector<LostWorker> ExpireLeases(absl::Time now);

  // Re-creates the leases of a running placement (adoption after a server restart); the job leaves
  // the queue if it was queued. OK if exactly this placement is already held. FAILED_PRECONDITION
  // when a worker is unknown or lost, its slots are not free (slots - leased; reported free slots
  // are not checked: the worker already counts these ranks), the port is leased to another job, or
  // the job is placed differently. INVALID_ARGUMENT for an empty job id or no ranks.
  absl::Status Adopt(const Placement& placement);

  // Introspection (tests, admin listing, the coordinator).
  // Usable free slots now: 0 for unknown, lost or disconnected workers.
  int FreeSlots(const std::string& worker_id) const;
  // Slots leased to placed jobs on the worker (0 for unknown).
  int LeasedSlots(const std::string& worker_id) const;
  // Queued job ids in scheduling order.
  std::vector<std::string> QueuedJobs() const;
  // Queued jobs' requests in priority order, without those the last Schedule held back for their
  // tenant's quota (the autoscaler's demand).
  std::vector<JobRequest> QueuedRequests() const;
  // Whether the worker is known, connected and not lost (the autoscaler counts these).
  bool Live(const std::string& worker_id) const;
  // Slots held by the tenant's placed jobs: in `pool`, or in every pool when `pool` is nullopt.
  int TenantSlots(const std::string& tenant, const std::optional<std::string>& pool) const;
  // Placed job ids, sorted.
  std::vector<std::string> PlacedJobs() const;
  std::optional<Placement> PlacementOf(const std::string& job_id) const;
  // Why a queued job is waiting, for the job's message, e.g. "waiting for 2 free slots matching
  // device CPU and pool=onprem (1 free)" or "no registered worker matches device CPU and pool=gpu;
  // it cannot run until one joins", "waiting: tenant alice holds 6 of its 8 slots on pool hpc;
  // this job needs 4" or "... reserved for job-x ...". "" when the job is not queued. Costs one
  // pass over the workers.
  std::string WaitReason(const std::string& job_id) const;

 private:
  struct Worker {
    WorkerState state;
    bool connected = true;
    bool lost = false;
    bool draining = false;
    absl::Time last_heartbeat;
    int reported_free = 0;        // free slots in the last heartbeat (slots until the first one)
    int placed_since_report = 0;  // slots leased to jobs placed on it since that heartbeat
    std::map<std::string, int> placed_since_jobs;  // those jobs -> their ranks here
    int leased = 0;                                // slots leased to placed jobs
    std::map<std::string, int> job_ranks;          // placed job id -> ranks of it here
    std::map<int, std::string> leased_ports;       // rendezvous port -> job id
    int order = 0;  // position in workers_ (id order), refreshed by each Schedule for cheap ties
    bool reserved = false;  // reserved for a gang in the current Schedule round
  };
  // Queue order: priority desc, submitted asc, id asc.
  struct QueueKey {
    int priority;
    absl::Time submitted;
    std::string id;
    bool operator<(const QueueKey& o) const {
      if (priority != o.priority) return priority > o.priority;
      if (submitted != o.submitted) return submitted < o.submitted;
      return id < o.id;
    }
  };
  struct Job {
    JobRequest request;
    bool placed = false;
    Placement placement;
    std::string port_blocked_on;  // worker whose lack of a free port stopped the last attempt
    // Set by the last Schedule round while queued:
    bool over_quota = false;                    // skipped for its tenant's quota
    std::vector<std::string> reserved_workers;  // workers reserved for it
    std::string reserved_behind;                // the job whose reservation kept it out
  };
  // A reservation made in one Schedule round.
  struct Reservation {
    std::string job_id;
    int world_size = 0;
    std::vector<Worker*> workers;
  };

  static bool Matches(const Worker& worker, const JobRequest& job);
  static std::string PoolOf(const JobRequest& job);
  const TenantPolicy& PolicyOf(const std::string& tenant) const;
  // The tenant's quota on the job's pool (0 = none).
  int QuotaOf(const JobRequest& job) const;
  // Reserves unreserved `workers` (the job's placeable matching ones) for it; false when they
  // cannot hold it even when empty. Lowers *total_free by the usable slots reserved.
  bool Reserve(Job& job, const std::vector<Worker*>& workers, long* total_free,
               std::vector<Reservation>* reservations);
  // Tries to place one job in this round: quota, then free slots outside reservations, then a
  // reservation of its own. Returns true when placed (and leased).
  struct Round;
  bool Consider(Job& job, Round& round, Placement* placement);
  static int Usable(const Worker& worker);
  bool Placeable(const Worker& worker, absl::Time now) const;
  // The lowest free rendezvous port of the worker, or -1.
  static int FreePort(const Worker& worker);
  // Tries to place one queued job on `candidates`; returns false (and changes nothing) when it
  // cannot.
  bool TryPlace(Job& job, const std::vector<Worker*>& candidates, Placement* out);
  // Leases the placement's slots and port; count_as_new adds them to the slots placed since the
  // workers' last heartbeats (false for adopted ranks, which those heartbeats already count).
  void Lease(Job& job, const Placement& placement, bool count_as_new);
  void Release(Job& job);

  SchedulerOptions options_;
  std::map<std::string, Worker> workers_;      // by id (ordered: ties are broken by worker id)
  std::unordered_map<std::string, Job> jobs_;  // queued and placed jobs by id
  std::set<QueueKey> queue_;
  std::map<std::string, TenantPolicy> policies_;
  std::unordered_map<std::string, int> tenant_slots_;  // tenant -> slots its placed jobs hold
  std::map<std::pair<std::string, std::string>, int> tenant_pool_slots_;  // (tenant, pool) -> slots
};

}  // namespace gantry::scheduler

#endif  // GANTRY_SCHEDULER_SCHEDULER_H_
