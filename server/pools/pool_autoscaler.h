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
#include "server/coordinator/coordinator_state.h"
#include "server/platform/backend.h"
#include "server/pools/provisioner.h"

namespace gantry::server {

// Thread-safe. `backend` and `state` must outlive it; Stop() (or the destructor) kills the
// provisioner commands under way and waits for their threads.
class PoolAutoscaler {
 public:
  PoolAutoscaler(Backend& backend, CoordinatorState& state);
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

  Backend& backend_;
  CoordinatorState& state_;
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
