// CoordinatorState: the in-memory view of workers and jobs the coordinator's parts share, under
// one mutex that is never held across database I/O.
#ifndef GANTRY_SERVER_COORDINATOR_COORDINATOR_STATE_H_
#define GANTRY_SERVER_COORDINATOR_COORDINATOR_STATE_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gantry/v1/training.pb.h"
#include "gantry/v1/worker.pb.h"
#include "scheduler/scheduler.h"
#include "server/coordinator/coordinator_views.h"
#include "server/coordinator/worker_link.h"

namespace gantry::server {

// What the server last heard about one rank of an active job.
struct RankState {
  gantry::v1::RankPhase phase = gantry::v1::RANK_PHASE_UNSPECIFIED;
  int exit_code = 0;
  std::string message;
};

// Where an active job is in its life. One phase at a time:
//   kRunning -> kRestarting      a failure of this attempt is being handled (one claim per attempt)
//   kRestarting -> kRunning      nothing was restarted (the failure was final, or not written yet)
//   kRestarting -> kQueued       the restart is stored: in the scheduler's queue for the next attempt
//   kQueued -> kRunning          placed again
//   any but ending -> kCancelling (kCancellingQueued from kQueued): cancellation sent to its ranks
//   any -> kEnded (kEndedQueued from a queued phase): a terminal state is stored
// The *Queued phases are the same ends for a job that had no rank of its current attempt running,
// so they wait for nothing.
enum class JobPhase {
  kRunning,
  kRestarting,
  kQueued,
  kCancelling,
  kCancellingQueued,
  kEnded,
  kEndedQueued,
};
const char* JobPhaseName(JobPhase phase);

// A job with leased slots or live ranks, or one restarting (waiting to be placed again).
struct ActiveJob {
  std::string id;
  std::string owner;
  gantry::v1::JobSpec spec;
  int attempt = 0;                        // Job.attempt: messages of other attempts change nothing
  std::vector<std::string> rank_workers;  // empty for an adopted job (unknown placement)
  // Every worker running a rank of it, this attempt's and earlier ones' still stopping (their
  // messages are accepted, and ignored when of an earlier attempt).
  std::set<std::string> workers;
  std::map<int, RankState> ranks;  // this attempt's ranks
  JobPhase phase = JobPhase::kRunning;
  absl::Time placed_at;
  absl::Time ended_at;  // when it was cancelled or its end stored: the ranks' grace starts
  absl::Time running_since = absl::InfinitePast();  // all ranks of this attempt running
  absl::Time last_progress_event = absl::InfinitePast();
  int64_t last_progress_step = -1;
  int last_progress_epoch = -1;
  // The progress watchdog: the latest step rank 0 reported, when it changed, and recent seconds
  // per step (from successive reports).
  int64_t latest_step = -1;
  absl::Time latest_step_at = absl::InfinitePast();
  std::vector<double> step_seconds;  // a ring of the last few rates
  bool leased = true;  // false for adopted jobs (their slots are bounded by heartbeats only)

  // In the scheduler's queue for its next attempt, or ended there: no rank of this attempt runs.
  bool Queued() const;
  // Cancelled or ended: no failure is handled and no new work is asked of its ranks.
  bool Stopping() const;
  // A terminal state is stored.
  bool Ended() const { return phase == JobPhase::kEnded || phase == JobPhase::kEndedQueued; }

  // The transitions of JobPhase. Each returns whether it happened; a refused one changes nothing.
  bool ClaimFailure();  // kRunning -> kRestarting
  void ReleaseClaim();  // kRestarting -> kRunning (other phases stay)
  // The restart is stored: forgets this attempt's ranks; kRestarting -> kQueued (true: the caller
  // queues it with the scheduler). Cancelled or ended meanwhile: the *Queued phase of that (false).
  bool Requeue(int next_attempt);
  bool PlaceAgain();  // kQueued -> kRunning
  bool Cancel();      // kRunning, kRestarting -> kCancelling; kQueued -> kCancellingQueued
  bool End();         // -> kEnded, or kEndedQueued when queued; false when already ended

  int CountRanks(gantry::v1::RankPhase phase) const;
  // The median of step_seconds; 0 when none is known.
  double MedianStepSeconds() const;
};

// What a connected worker said in its latest heartbeat (ListWorkers, GetModel readiness).
struct WorkerReport {
  gantry::v1::Heartbeat heartbeat;
  absl::Time at = absl::InfinitePast();
};

// Plain data plus helpers; every member is read and written with `mu` held, and no holder of `mu`
// calls the database (decisions are collected under it, written after releasing it).
struct CoordinatorState {
  // `now`: the coordinator's clock (absl::Now in the server; a test's own clock in process).
  explicit CoordinatorState(scheduler::SchedulerOptions options,
                            std::function<absl::Time()> now = &absl::Now)
      : clock(std::move(now)), scheduler(options) {}

  // Every time the coordinator's parts record or compare (placed_at, ended_at, retries, leases).
  absl::Time Now() const { return clock(); }

  // The worker's registered name, else its id.
  std::string WorkerName(const std::string& worker_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Tells every worker running ranks of `job` to stop them.
  void SendCancellation(const ActiveJob& job, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Asks `worker` to checkpoint and stop the ranks of `job`'s current attempt (drain, preemption).
  void SendCheckpointAndStop(const ActiveJob& job, const std::string& worker,
                             const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Drained by an operator, or announced a preemption.
  bool Draining(const std::string& worker_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return drained.count(worker_id) > 0 || preempting.count(worker_id) > 0;
  }

  // Ranks the worker's latest heartbeat lists as running (0 before its first).
  int RunningRanks(const std::string& worker_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // PoolControl's operations (JobCoordinator forwards them here); each takes `mu` itself.
  CoordinatorSnapshot Snapshot() const ABSL_LOCKS_EXCLUDED(mu);
  std::vector<std::string> RetireIdle(const std::vector<std::string>& worker_ids)
      ABSL_LOCKS_EXCLUDED(mu);
  void Unretire(const std::vector<std::string>& worker_ids) ABSL_LOCKS_EXCLUDED(mu);
  void SetPoolNotes(const std::vector<std::string>& considered,
                    std::map<std::string, std::string> notes) ABSL_LOCKS_EXCLUDED(mu);

  const std::function<absl::Time()> clock;  // set once, read without `mu`
  mutable absl::Mutex mu;
  scheduler::Scheduler scheduler ABSL_GUARDED_BY(mu);
  std::map<std::string, gantry::v1::RegisterRequest> registered ABSL_GUARDED_BY(mu);
  std::map<std::string, std::shared_ptr<WorkerLink>> links ABSL_GUARDED_BY(mu);
  std::map<std::string, ActiveJob> active ABSL_GUARDED_BY(mu);
  std::set<std::string> queued ABSL_GUARDED_BY(mu);      // job ids submitted to the scheduler
  std::set<std::string> drained ABSL_GUARDED_BY(mu);     // worker ids an operator drained
  std::set<std::string> preempting ABSL_GUARDED_BY(mu);  // worker ids that announced a preemption
  // Jobs found active in the database at start, waiting for a worker to claim them.
  std::map<std::string, gantry::v1::Job> orphans ABSL_GUARDED_BY(mu);
  bool orphans_loaded ABSL_GUARDED_BY(mu) = false;
  // The latest heartbeat of every worker connected to this process (memory only; dropped when its
  // stream ends or its lease expires, so nothing stale is shown).
  std::map<std::string, WorkerReport> reports ABSL_GUARDED_BY(mu);
  // The pool autoscaler's word on queued jobs (e.g. "pool hpc cannot scale up: ..."), appended to
  // the scheduler's wait reason in their messages.
  std::map<std::string, std::string> pool_notes ABSL_GUARDED_BY(mu);
  absl::Time started_at ABSL_GUARDED_BY(mu) = absl::InfinitePast();
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_COORDINATOR_STATE_H_
