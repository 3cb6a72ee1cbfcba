// PlacementLoop: the coordinator's tick: queues new jobs with the scheduler, expires silent
// workers (their jobs restart or fail), places gangs (one Assignment per rank, restarted jobs
// again with their next attempt), completes cancellations, times out ranks that never start or
// never exit, watches progress for hangs, handles jobs no worker claimed after a server restart,
// and explains waits.
#ifndef GANTRY_SERVER_COORDINATOR_PLACEMENT_LOOP_H_
#define GANTRY_SERVER_COORDINATOR_PLACEMENT_LOOP_H_

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/periodic_task.h"
#include "gantry/v1/training.pb.h"
#include "gantry/v1/worker.pb.h"
#include "scheduler/scheduler.h"
#include "server/coordinator/coordinator_deps.h"
#include "server/coordinator/coordinator_state.h"
#include "scheduler/generation_router.h"
#include "server/coordinator/job_lifecycle.h"
#include "server/platform/budget_gate.h"
#include "server/platform/server_options.h"
#include "server/platform/tenant_quotas.h"
#include "server/platform/worker_credentials.h"
#include "storage/cost_repository.h"
#include "storage/dataset_repository.h"
#include "storage/job_repository.h"
#include "storage/model_repository.h"
#include "storage/pool_repository.h"
#include "storage/tenant_limits_repository.h"
#include "storage/worker_identity_repository.h"
#include "storage/worker_repository.h"

namespace gantry::server {

// Start/Stop are thread-safe; Tick runs on one thread at a time (Start's, or a test's). Every
// phase decides under `state.mu`, releases it, then writes the database. Every reference must
// outlive it; `router` may be null.
class PlacementLoop {
 public:
  PlacementLoop(const CoordinatorDeps& deps, CoordinatorState& state, JobLifecycle& lifecycle,
                scheduler::GenerationRouter* router)
      : jobs_(deps.jobs),
        datasets_(deps.datasets),
        models_(deps.models),
        pools_(deps.pools),
        workers_(deps.workers),
        identities_(deps.identities),
        tenant_limits_(deps.tenant_limits),
        costs_(deps.costs),
        quotas_(deps.quotas),
        credentials_(deps.credentials),
        options_(deps.options),
        file_datasets_(deps.file_datasets),
        state_(state),
        lifecycle_(lifecycle),
        router_(router),
        budget_gate_(deps.costs, deps.options.budget_refresh),
        task_(deps.options.scheduler_tick, [this] { Tick(state_.Now()); }) {}
  ~PlacementLoop() { Stop(); }

  // Starts the tick loop (every options.coordinator.scheduler_tick); Stop() ends it (idempotent).
  void Start();
  void Stop();
  // One pass of the loop.
  void Tick(absl::Time now);

 private:
  // Ends the orphans no worker claimed within the lease timeout after the start.
  void EndUnclaimedOrphans(absl::Time now);
  // Submits new QUEUED jobs to the scheduler; drops the ones no longer QUEUED.
  void SyncQueue(const std::vector<gantry::v1::Job>& queued);
  // What the scheduler needs to know about a new job; nullopt when the job was failed instead.
  std::optional<scheduler::JobRequest> MakeJobRequest(const gantry::v1::Job& job);
  void ExpireWorkers(absl::Time now);
  void PlaceJobs(absl::Time now);
  // Monthly budgets: `queued` without the jobs of tenants that spent their budget (they wait,
  // their message says why, and the scheduler never sees them).
  std::vector<gantry::v1::Job> HoldOverBudget(std::vector<gantry::v1::Job> queued, absl::Time now);
  // Records the start of a placed attempt's usage (pool, devices, price) for its cost.
  void RecordUsageStart(const ActiveJob& job, const scheduler::Placement& placement);
  // Places one decided gang: the job moves to PLACING (or a restarting one is placed again), its
  // placement is recorded and every rank is sent its Assignment.
  void Place(const scheduler::Placement& placement, const std::vector<std::string>& names,
             absl::Time now) ABSL_LOCKS_EXCLUDED(state_.mu);
  // Moves a job placed for the first time to PLACING and observes its queue wait; nullopt (its
  // slots given back) when it was cancelled meanwhile.
  std::optional<gantry::v1::Job> EnterPlacing(const scheduler::Placement& placement,
                                              const std::string& where, absl::Time now)
      ABSL_LOCKS_EXCLUDED(state_.mu);
  // Marks the job's ActiveJob placed by `placement` (filled from `started` unless it is placed
  // again, when `started` is null) and returns a copy of it.
  ActiveJob MarkPlaced(const scheduler::Placement& placement, const gantry::v1::Job* started,
                       absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  // Records which worker runs which rank and the attempt's usage start, and logs the placement of
  // an attempt placed again.
  void RecordPlacedAttempt(const ActiveJob& placed, const scheduler::Placement& placement,
                           const std::string& where, bool again,
                           const gantry::v1::Assignment& common) ABSL_LOCKS_EXCLUDED(state_.mu);
  // Sends each rank of `placed` its Assignment over its worker's link, in rank order (`a` is the
  // job's live ActiveJob); stops at the first disconnected worker and returns why.
  std::optional<std::string> SendAssignments(const scheduler::Placement& placement,
                                             const std::vector<std::string>& names,
                                             const ActiveJob& placed,
                                             const gantry::v1::Assignment& common, ActiveJob& a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  void HandleCancellations(const std::vector<gantry::v1::Job>& cancelling, absl::Time now);
  void ReapEnded(absl::Time now);
  // The progress watchdog: restarts RUNNING jobs whose rank 0 reports no new step in time.
  void WatchProgress(absl::Time now);
  // Every 2 s: reads the tenants' fair-share weights and pool quotas (one query, outside the
  // coordinator's lock) and hands them to the scheduler, so the placement pass never waits on SQL.
  void RefreshTenantPolicies(absl::Time now);
  // Every few seconds: the scheduler's reason why each queued job waits becomes its message.
  void ExplainWaits(absl::Time now);
  // What every rank's Assignment shares (the dataset sha and the fine-tuning checkpoint are
  // looked up once per placement); rank and threads are set per rank.
  absl::StatusOr<gantry::v1::Assignment> MakeAssignment(const ActiveJob& job,
                                                        const scheduler::Placement& placement);

  storage::JobRepository& jobs_;
  storage::DatasetRepository& datasets_;            // an uploaded dataset's sha for the Assignment
  storage::ModelRepository& models_;                // the fine-tuning checkpoint
  storage::PoolRepository& pools_;                  // a pool's price, for the usage record
  storage::WorkerRepository& workers_;              // lost workers are marked disconnected
  storage::WorkerIdentityRepository& identities_;   // which worker runs which rank
  storage::TenantLimitsRepository& tenant_limits_;  // fair-share weights and pool quotas
  storage::CostRepository& costs_;                  // usage starts
  TenantQuotas& quotas_;                            // the default limits
  WorkerCredentials& credentials_;                  // rank credentials and rendezvous secrets
  const CoordinatorOptions options_;
  const FileDatasetOptions file_datasets_;  // the owner's file:// roots, sent with an Assignment
  CoordinatorState& state_;
  JobLifecycle& lifecycle_;
  scheduler::GenerationRouter* const router_;  // not owned; may be null
  BudgetGate budget_gate_;

  // Touched by the ticking thread only.
  std::map<std::string, std::string> wait_reasons_;  // last message written per queued job
  absl::Time last_explained_ = absl::InfinitePast();
  absl::Time policies_loaded_ = absl::InfinitePast();
  std::map<std::string, std::string> budget_holds_;  // job held for its tenant's budget -> message

  PeriodicTask task_;  // last: its thread stops before the members it reads go
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_PLACEMENT_LOOP_H_
