// JobLifecycle: every state transition the coordinator writes for a job (QUEUED -> PLACING ->
// RUNNING -> SUCCEEDED / FAILED / CANCELLED), restarts from the latest checkpoint after retryable
// failures (-> RESTARTING -> RUNNING), and the end of jobs lost over a server restart.
#ifndef GANTRY_SERVER_COORDINATOR_JOB_LIFECYCLE_H_
#define GANTRY_SERVER_COORDINATOR_JOB_LIFECYCLE_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/failure_policy.h"
#include "gantry/v1/training.pb.h"
#include "scheduler/types.h"
#include "server/coordinator/coordinator_state.h"
#include "storage/dataset_repository.h"
#include "storage/job_repository.h"
#include "storage/pool_repository.h"

namespace gantry::server {

// Thread-safe. Each call writes the database without holding `state.mu`, then takes the lock to
// bring the in-memory view in line. Every reference must outlive it.
class JobLifecycle {
 public:
  JobLifecycle(storage::JobRepository& jobs, storage::PoolRepository& pools,
               storage::DatasetRepository& datasets, CoordinatorState& state)
      : jobs_(jobs), pools_(pools), datasets_(datasets), state_(state) {}

  // QUEUED -> PLACING; an error when the job left QUEUED meanwhile (cancelled).
  absl::StatusOr<gantry::v1::Job> StartPlacing(const std::string& job_id,
                                               const std::string& message);
  // PLACING or RESTARTING -> RUNNING once all `ranks` ranks of `attempt` joined the process group.
  void StartRunning(const std::string& job_id, int attempt, int ranks);
  // Moves the job to `to` unless it already left `from`; marks it ended and tells its other ranks
  // to stop when `to` is terminal. When the database cannot be written the transition is kept and
  // RetryDeferred() tries it again with backoff (200 ms doubling up to 10 s) until it is stored.
  void End(const std::string& job_id, const std::vector<gantry::v1::JobState>& from,
           gantry::v1::JobState to, const std::string& reason, const std::string& message);
  // A failure of an active job's `attempt` (-1: whatever attempt is current). Permanent failures
  // end it FAILED. Retryable ones restart it from its latest checkpoint: RESTARTING, its ranks told
  // to stop, its leases released and the gang queued again; FAILED instead when a counted failure
  // would exceed spec.max_restarts. A failure while one of the attempt's workers is draining or
  // preempted is that drain or preemption (not counted). Failures of an attempt already being
  // restarted, cancelled or ended are ignored. When the database cannot be written the failure is
  // kept and RetryDeferred() tries again.
  void Fail(const std::string& job_id, int attempt, FailureClass failure,
            const std::string& message);
  // Retries the failures Fail and the transitions End could not write (called every tick).
  void RetryDeferred();
  // Ends a job the database had active at start that no worker claimed within `wait`:
  // CANCELLING -> CANCELLED; RESTARTING is queued again (the restart goes on); PLACING and RUNNING
  // fail as WorkerLost (so they restart when max_restarts allows).
  void EndUnclaimed(const gantry::v1::Job& job, absl::Duration wait);
  // Reads the jobs the database has active into state.orphans once; false when it cannot.
  bool LoadOrphans();
  // Appends an event to the job's log; a failure is logged, not returned.
  void AppendEventOrLog(const std::string& job_id, const gantry::v1::JobEvent& event);
  // What the scheduler needs to know to place `job` (its dataset's cache key needs a lookup for
  // uploaded datasets: NOT_FOUND when that dataset is gone).
  absl::StatusOr<scheduler::JobRequest> MakeJobRequest(const gantry::v1::Job& job);

 private:
  struct Deferred {
    std::string job_id;
    int attempt;
    FailureClass failure;
    std::string message;
  };
  // Writes the restart; false (nothing changed) when the database could not be written.
  bool Restart(const std::string& job_id, const FailureClass& failure, const std::string& message,
               int64_t latest_step, double step_seconds);
  // Clears the claim Fail took on the job.
  void Unclaim(const std::string& job_id);
  void Defer(Deferred deferred);
  struct DeferredEnd {
    std::string job_id;
    std::vector<gantry::v1::JobState> from;
    gantry::v1::JobState to;
    std::string reason;
    std::string message;
    int tries = 0;
    absl::Time next_try;
  };
  // End's work; false when the database could not be written (nothing changed).
  bool TryEnd(const DeferredEnd& end);

  storage::JobRepository& jobs_;
  storage::PoolRepository& pools_;        // MakeJobRequest: the job's pool
  storage::DatasetRepository& datasets_;  // MakeJobRequest: an uploaded dataset's cache key
  CoordinatorState& state_;
  absl::Mutex deferred_mu_;
  std::vector<Deferred> deferred_ ABSL_GUARDED_BY(deferred_mu_);
  std::vector<DeferredEnd> deferred_ends_ ABSL_GUARDED_BY(deferred_mu_);
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_JOB_LIFECYCLE_H_
