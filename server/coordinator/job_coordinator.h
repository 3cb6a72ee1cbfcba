// JobCoordinator: drives training jobs from QUEUED to a registered model by wiring its parts: the
// shared in-memory view (CoordinatorState), the state transitions (JobLifecycle), the tick
// (PlacementLoop), the worker streams (WorkerSessions) and model registration (ModelRegistrar).
//
// Restart: nothing about a running job lives only in memory that cannot be rebuilt. After a server
// restart, jobs the database has as PLACING/RUNNING/RESTARTING/CANCELLING are adopted when a
// worker's hello lists them (their ranks keep running through the outage); of the jobs no worker
// claims within the lease timeout, RESTARTING ones are queued again and the others fail as
// WorkerLost (and restart when their max_restarts allows).
#ifndef GANTRY_SERVER_COORDINATOR_JOB_COORDINATOR_H_
#define GANTRY_SERVER_COORDINATOR_JOB_COORDINATOR_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gantry/v1/worker.pb.h"
#include "server/coordinator/coordinator_deps.h"
#include "server/coordinator/coordinator_state.h"
#include "server/coordinator/coordinator_views.h"
#include "scheduler/generation_router.h"
#include "server/coordinator/job_lifecycle.h"
#include "server/coordinator/model_registrar.h"
#include "server/coordinator/placement_loop.h"
#include "server/coordinator/worker_link.h"
#include "server/coordinator/worker_sessions.h"

namespace gantry::server {

// Thread-safe. Every reference in `deps` must outlive it. Its state is its own: the rest of the
// server sees it through PoolControl's snapshot and operations.
class JobCoordinator : public PoolControl {
 public:
  // `router` (may be null; must outlive it) is told about worker registrations, connections,
  // heartbeats and losses, so that generation follows the same view of the pool.
  explicit JobCoordinator(const CoordinatorDeps& deps,
                          scheduler::GenerationRouter* router = nullptr);

  // The tick loop (every options.scheduler_tick); Stop() ends it (idempotent).
  void Start() { loop_.Start(); }
  void Stop() { loop_.Stop(); }
  void Tick(absl::Time now) { loop_.Tick(now); }

  // The worker streams; see WorkerSessions.
  WorkerSessions& sessions() { return sessions_; }

  // PoolControl (the pool autoscaler; /metrics reads the snapshot too).
  CoordinatorSnapshot Snapshot() const override { return state_.Snapshot(); }
  std::vector<std::string> RetireIdle(const std::vector<std::string>& worker_ids) override {
    return state_.RetireIdle(worker_ids);
  }
  void Unretire(const std::vector<std::string>& worker_ids) override {
    state_.Unretire(worker_ids);
  }
  void SetPoolNotes(const std::vector<std::string>& considered,
                    std::map<std::string, std::string> notes) override {
    state_.SetPoolNotes(considered, std::move(notes));
  }

 private:
  CoordinatorState state_;
  JobLifecycle lifecycle_;
  ModelRegistrar registrar_;
  WorkerSessions sessions_;
  PlacementLoop loop_;  // last: stopped before the parts it uses go away
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_JOB_COORDINATOR_H_
