// WorkerSessions: what arrives on the workers' Register calls and Connect streams (hello,
// heartbeats, rank status, progress, logs, results) and what it changes.
#ifndef GANTRY_SERVER_COORDINATOR_WORKER_SESSIONS_H_
#define GANTRY_SERVER_COORDINATOR_WORKER_SESSIONS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gantry/v1/worker.pb.h"
#include "server/coordinator/coordinator_state.h"
#include "scheduler/generation_router.h"
#include "server/coordinator/job_lifecycle.h"
#include "server/coordinator/model_registrar.h"
#include "server/coordinator/worker_link.h"
#include "storage/job_repository.h"
#include "storage/worker_identity_repository.h"

namespace gantry::server {

// Thread-safe (one call per stream at a time, many streams at once). Holds `state.mu` only while
// it reads or updates the in-memory view, never across database I/O. Every reference must outlive
// it; `router` may be null.
class WorkerSessions {
 public:
  // `progress_event_interval`: the least time between two progress events of a job
  // (CoordinatorOptions).
  WorkerSessions(storage::JobRepository& jobs, storage::WorkerIdentityRepository& identities,
                 absl::Duration progress_event_interval, CoordinatorState& state,
                 JobLifecycle& lifecycle, ModelRegistrar& registrar,
                 scheduler::GenerationRouter* router)
      : jobs_(jobs),
        identities_(identities),
        progress_event_interval_(progress_event_interval),
        state_(state),
        lifecycle_(lifecycle),
        registrar_(registrar),
        router_(router) {}

  // WorkerService.Register: remembers what the worker offers (ports, threads, capacity), and
  // whether an operator drained it (stored with the worker). A registration ends a preemption.
  void OnRegister(const std::string& worker_id, const gantry::v1::RegisterRequest& request,
                  bool drained = false);
  // A daemon announced its preemption: no new placements on it; failures of jobs with ranks on it
  // restart with reason Preempted (not counted against max_restarts).
  void OnPreempting(const std::string& worker_id, const gantry::v1::Preempting& notice);
  // AdminService.DrainWorker: drain (no new placements; each running job's ranks there are asked
  // to checkpoint and stop, and the job restarts elsewhere as Drained) or undrain. Returns how
  // many jobs were asked to move.
  int Drain(const std::string& worker_id, bool drain);
  bool Draining(const std::string& worker_id) const;
  // Drained by an operator (not counting a preemption).
  bool Drained(const std::string& worker_id) const;
  // Whether the worker has an open Connect stream to this process.
  bool Connected(const std::string& worker_id) const;
  // WorkerService.Connect after a valid hello: the link its writer drains. Jobs the hello lists
  // that are no longer active get a Cancellation at once; orphans it lists are adopted. A job is
  // claimed only when one of its attempts was placed on this worker (in memory, or recorded in
  // the database); other claims are logged and ignored.
  std::shared_ptr<WorkerLink> OnConnect(const std::string& worker_id,
                                        const gantry::v1::Hello& hello);
  // The stream ended (the link is closed here).
  void OnDisconnect(const std::shared_ptr<WorkerLink>& link);
  absl::Status OnHeartbeat(const std::string& worker_id, const gantry::v1::Heartbeat& heartbeat);
  // The latest heartbeat of every connected worker, by worker id (see CoordinatorState::reports).
  std::map<std::string, WorkerReport> Reports() const;
  // rank_status, progress, log and result messages (job_id set), and preemption notices.
  // INVALID_ARGUMENT for a job message that names no job, FAILED_PRECONDITION for a job this
  // worker does not run, PERMISSION_DENIED for a rank (rank status, log; rank 0 for progress and
  // results) of the current attempt that was placed on another worker. Messages of an earlier
  // attempt of the job only add log lines.
  absl::Status OnWorkerMessage(const std::string& worker_id, const gantry::v1::WorkerMessage& m);

 private:
  // Tells the scheduler about a registered worker that connected.
  void UpsertScheduledWorker(const std::string& worker_id, const gantry::v1::Hello& hello)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  // Makes an orphan the hello lists active again; the event to record about it.
  // `placement`: rank -> worker of the orphan's attempt, as recorded (may be empty).
  gantry::v1::JobEvent AdoptOrphan(const std::string& worker_id, const gantry::v1::Job& orphan,
                                   const std::map<int, std::string>& placement)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);
  std::string WorkerNameOf(const std::string& worker_id) const;
  absl::Status HandleRankStatus(const std::string& worker_id, const std::string& job_id,
                                const gantry::v1::RankStatus& status);
  absl::Status HandleProgress(const std::string& job_id, const gantry::v1::Progress& progress);
  absl::Status HandleResult(const std::string& job_id, const gantry::v1::JobResult& result);

  storage::JobRepository& jobs_;
  storage::WorkerIdentityRepository& identities_;  // where each attempt's ranks were placed
  const absl::Duration progress_event_interval_;
  CoordinatorState& state_;
  JobLifecycle& lifecycle_;
  ModelRegistrar& registrar_;
  scheduler::GenerationRouter* const router_;  // not owned; may be null
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_WORKER_SESSIONS_H_
