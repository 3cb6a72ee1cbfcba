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

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gantry/v1/worker.pb.h"
#include "server/coordinator/coordinator_state.h"
#include "server/coordinator/generation_router.h"
#include "server/coordinator/job_lifecycle.h"
#include "server/coordinator/model_registrar.h"
#include "server/coordinator/placement_loop.h"
#include "server/coordinator/worker_link.h"
#include "server/coordinator/worker_sessions.h"
#include "server/platform/server_options.h"
#include "server/platform/tenant_quotas.h"
#include "server/platform/worker_credentials.h"
#include "storage/blob_store.h"
#include "storage/cost_repository.h"
#include "storage/dataset_repository.h"
#include "storage/job_repository.h"
#include "storage/model_repository.h"
#include "storage/pool_repository.h"
#include "storage/study_repository.h"
#include "storage/tenant_limits_repository.h"
#include "storage/worker_identity_repository.h"
#include "storage/worker_repository.h"

namespace gantry::server {

// What the coordinator's parts use, which JobCoordinator hands down to them. Every reference must
// outlive the coordinator (the struct itself need not: nothing keeps it).
struct CoordinatorDeps {
  storage::JobRepository& jobs;
  storage::DatasetRepository& datasets;
  storage::ModelRepository& models;
  storage::StudyRepository& studies;  // a registered model's study lineage
  storage::PoolRepository& pools;
  storage::WorkerRepository& workers;
  storage::WorkerIdentityRepository& identities;
  storage::TenantLimitsRepository& tenant_limits;
  storage::CostRepository& costs;
  storage::BlobStore& blobs;  // the size of an uploaded checkpoint
  TenantQuotas& quotas;
  WorkerCredentials& credentials;
  const CoordinatorOptions& options;
  const FileDatasetOptions& file_datasets;
};

// Thread-safe. Every reference in `deps` must outlive it.
class JobCoordinator {
 public:
  // `router` (may be null; must outlive it) is told about worker registrations, connections,
  // heartbeats and losses, so that generation follows the same view of the pool.
  explicit JobCoordinator(const CoordinatorDeps& deps, GenerationRouter* router = nullptr);

  // The tick loop (every options.scheduler_tick); Stop() ends it (idempotent).
  void Start() { loop_.Start(); }
  void Stop() { loop_.Stop(); }
  void Tick(absl::Time now) { loop_.Tick(now); }

  // The worker streams; see WorkerSessions.
  WorkerSessions& sessions() { return sessions_; }
  // The shared in-memory view (the /metrics collector reads it under its mutex).
  CoordinatorState& state() { return state_; }

 private:
  CoordinatorState state_;
  JobLifecycle lifecycle_;
  ModelRegistrar registrar_;
  WorkerSessions sessions_;
  PlacementLoop loop_;  // last: stopped before the parts it uses go away
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_JOB_COORDINATOR_H_
