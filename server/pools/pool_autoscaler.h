// PoolAutoscaler: the server's loop that grows and shrinks elastic pools. Every
// options.autoscale_interval it reads the pools, takes a snapshot of the pools' workers and the
// queued jobs from the coordinator, asks the pure scheduler::Autoscaler for a plan and starts the
// provisioner calls it asks for on threads of their own (never on the scheduling loop; one call at
// a time per pool, each bounded by its provisioner's timeout). It keeps each pool's status
// (workers, pending, last error, backoff) for AdminService and writes notes for waiting jobs.
#ifndef GANTRY_SERVER_POOLS_POOL_AUTOSCALER_H_
#define GANTRY_SERVER_POOLS_POOL_AUTOSCALER_H_

#include <atomic>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/periodic_task.h"
#include "gantry/v1/admin.pb.h"
#include "scheduler/autoscaler.h"
#include "server/coordinator/coordinator_views.h"
#include "server/platform/server_options.h"
#include "server/pools/provisioner.h"
#include "storage/pool_repository.h"

namespace gantry::server {

// Thread-safe. `pools` and `coordinator` must outlive it; Stop() (or the destructor) kills the
// provisioner commands under way and waits for their threads.
class PoolAutoscaler {
 public:
  PoolAutoscaler(storage::PoolRepository& pools, const PoolOptions& options,
                 PoolControl& coordinator);
  ~PoolAutoscaler() { Stop(); }
  PoolAutoscaler(const PoolAutoscaler&) = delete;
  PoolAutoscaler& operator=(const PoolAutoscaler&) = delete;

  void Start();
  void Stop();
  // One pass (the loop's, or a test's).
  void Tick(absl::Time now);
  // What the server observes of the pool now (workers counted from the coordinator).
  gantry::v1::PoolStatus StatusOf(const std::string& pool);
  // A pool was created, updated or deleted: plan again soon.
  void Wake();

 private:
  // What the autoscaler remembers of one pool between passes.
  struct PoolRuntime {
    std::string spec_bytes;  // the spec its provisioner was built from
    std::shared_ptr<Provisioner> provisioner;
    int expected_workers = 0;                        // live workers expected once pending ones join
    absl::Time expect_until = absl::InfinitePast();  // pending ones count until then
    bool in_flight = false;
    int failures = 0;  // consecutive
    absl::Time backoff_until = absl::InfinitePast();
    std::string last_error;
    absl::Time last_error_at = absl::InfinitePast();
    std::string last_action;
    gantry::v1::PoolStatus observed;  // counts of the last pass
  };
  using PoolsByName = std::map<std::string, const gantry::v1::Pool*>;
  using RemovalsByPool = std::map<std::string, std::vector<ProvisionedWorker>>;
  // What the coordinator holds of the pools' workers and queued jobs, copied under its lock.
  struct Snapshot {
    std::vector<scheduler::PoolWorker> workers;
    std::map<std::string, ProvisionedWorker> refs;  // by worker id
    std::vector<scheduler::PoolJob> jobs;
    std::map<std::string, int> live;  // live workers by pool

    int Live(const std::string& pool) const {
      const auto it = live.find(pool);
      return it == live.end() ? 0 : it->second;
    }
  };

  // The phases of Tick, in order.
  Snapshot SnapshotOf(const PoolsByName& by_name);
  // Starts, resets and drops the workers' idle clocks, marks workers being removed as draining
  // and forgets pools no longer listed (unless a call of theirs still runs).
  void Forget(const PoolsByName& by_name, std::vector<scheduler::PoolWorker>* workers,
              absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Each pool's provisioner (rebuilt when its spec changed) and what it is doing: pending
  // workers (an error once they are past the join timeout), calls in flight, backoff.
  std::map<std::string, scheduler::PoolProvisioning> Provisioning(const PoolsByName& by_name,
                                                                  const Snapshot& snapshot,
                                                                  absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartScaleUps(const scheduler::AutoscalePlan& plan, const Snapshot& snapshot,
                     const std::map<std::string, scheduler::PoolProvisioning>& provisioning,
                     absl::Time now, std::map<std::string, std::string>* notes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records each pool's observed counts, notes the jobs that wait for pending workers and
  // withdraws pending workers no job waits for.
  void ObserveAndWithdraw(const scheduler::AutoscalePlan& plan, const PoolsByName& by_name,
                          const std::map<std::string, scheduler::PoolProvisioning>& provisioning,
                          const Snapshot& snapshot, std::map<std::string, std::string>* notes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The workers still idle and not drained, now drained for their removal (PoolControl::
  // RetireIdle); writes the jobs' notes.
  RemovalsByPool ConfirmRemovals(RemovalsByPool to_remove,
                                 const std::vector<scheduler::PoolJob>& jobs,
                                 std::map<std::string, std::string> notes);
  void StartScaleDown(const std::string& pool, std::vector<ProvisionedWorker> list)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A provisioner call running on its own thread.
  struct Call {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  // Runs `fn` on a thread of its own; marks the pool in flight until it returns, then records
  // the outcome (backoff on failure).
  void Launch(const std::string& pool, std::string action, std::function<absl::Status()> fn,
              std::function<void(const absl::Status&)> after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void JoinFinishedCalls() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  storage::PoolRepository& pool_repository_;  // the pools as stored (AdminService writes them)
  const PoolOptions options_;
  PoolControl& coordinator_;
  const scheduler::Autoscaler autoscaler_;

  absl::Mutex mu_;
  std::map<std::string, PoolRuntime> pools_ ABSL_GUARDED_BY(mu_);
  std::list<Call> calls_ ABSL_GUARDED_BY(mu_);
  // When each worker last had a busy slot (or was first seen): the idle timeout counts from it.
  std::map<std::string, absl::Time> idle_since_ ABSL_GUARDED_BY(mu_);
  // Workers handed to a provisioner's scale-down (not counted as free until they are gone).
  std::set<std::string> removing_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> cancel_calls_{false};  // set by Stop: provisioner commands end at once
  PeriodicTask task_;                      // last: its thread stops before the members it reads go
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_POOLS_POOL_AUTOSCALER_H_
