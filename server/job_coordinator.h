// JobCoordinator: drives training jobs from QUEUED to a registered model. It owns the scheduler
// (a pure library) and the live worker control streams: every tick it queues new jobs, expires
// silent workers, places gangs (QUEUED -> PLACING, one Assignment per rank), completes
// cancellations, and times out ranks that never start or never exit. Messages from workers (rank
// status, progress, logs, results) arrive through the WorkerService Connect streams; a successful
// JobResult registers a model version in the catalog and ends the job SUCCEEDED.
//
// Restart: nothing about a running job lives only in memory that cannot be rebuilt. After a server
// restart, jobs the database has as PLACING/RUNNING/CANCELLING are adopted when a worker's hello
// lists them (their ranks keep running through the outage); jobs no worker claims within the lease
// timeout end FAILED with reason "Lost".
#ifndef GANTRY_SERVER_JOB_COORDINATOR_H_
#define GANTRY_SERVER_JOB_COORDINATOR_H_

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gantry/v1/training.pb.h"
#include "gantry/v1/worker.pb.h"
#include "scheduler/scheduler.h"
#include "server/backend.h"
#include "server/generation_router.h"

namespace gantry::server {

// The outgoing half of one worker's Connect stream: a queue the stream's writer drains.
// Thread-safe.
class WorkerLink {
 public:
  explicit WorkerLink(std::string worker_id) : worker_id_(std::move(worker_id)) {}
  const std::string& worker_id() const { return worker_id_; }

  // Queues a message; false once the link is closed.
  bool Send(gantry::v1::ServerMessage message);
  // The next message, waiting up to `timeout`; nullopt on timeout or once closed and drained.
  std::optional<gantry::v1::ServerMessage> Next(absl::Duration timeout);
  void Close();
  bool closed() const;

 private:
  const std::string worker_id_;
  mutable absl::Mutex mu_;
  std::deque<gantry::v1::ServerMessage> queue_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Thread-safe. `backend` must outlive it.
class JobCoordinator {
 public:
  // `router` (may be null; must outlive it) is told about worker registrations, connections,
  // heartbeats and losses, so that generation follows the same view of the pool.
  explicit JobCoordinator(Backend& backend, GenerationRouter* router = nullptr);
  ~JobCoordinator();

  // Starts the tick loop (every options.scheduler_tick); Stop() ends it (idempotent).
  void Start();
  void Stop();
  // One pass of the loop (tests and Start's thread).
  void Tick(absl::Time now);

  // WorkerService.Register: remembers what the worker offers (ports, threads, capacity).
  void OnRegister(const std::string& worker_id, const gantry::v1::RegisterRequest& request);
  // WorkerService.Connect after a valid hello: the link its writer drains. Jobs the hello lists
  // that are no longer active get a Cancellation at once.
  std::shared_ptr<WorkerLink> OnConnect(const std::string& worker_id,
                                        const gantry::v1::Hello& hello);
  // The stream ended (the link is closed here).
  void OnDisconnect(const std::shared_ptr<WorkerLink>& link);
  absl::Status OnHeartbeat(const std::string& worker_id, const gantry::v1::Heartbeat& heartbeat);
  // rank_status, progress, log and result messages (job_id set). INVALID_ARGUMENT for a message
  // that names no job or a job this worker does not run.
  absl::Status OnWorkerMessage(const std::string& worker_id, const gantry::v1::WorkerMessage& m);

 private:
  struct RankState {
    gantry::v1::RankPhase phase = gantry::v1::RANK_PHASE_UNSPECIFIED;
    int exit_code = 0;
    std::string message;
  };
  // A job with leased slots or live ranks.
  struct ActiveJob {
    std::string id;
    std::string owner;
    gantry::v1::JobSpec spec;
    std::vector<std::string> rank_workers;  // empty for an adopted job (unknown placement)
    std::set<std::string> workers;          // every worker running a rank of it
    std::map<int, RankState> ranks;
    bool ended = false;  // a terminal state was written (or is being written); waiting for exits
    absl::Time placed_at;
    absl::Time ended_at;
    absl::Time last_progress_event = absl::InfinitePast();
    int64_t last_progress_step = -1;
    int last_progress_epoch = -1;
    bool cancel_sent = false;
    bool leased = true;  // false for adopted jobs (their slots are bounded by heartbeats only)
  };

  void Loop();
  // Submits new QUEUED jobs to the scheduler; drops the ones no longer QUEUED.
  void SyncQueue(const std::vector<gantry::v1::Job>& queued);
  void ExpireWorkers(absl::Time now);
  void PlaceJobs(absl::Time now);
  void HandleCancellations(const std::vector<gantry::v1::Job>& cancelling, absl::Time now);
  void ReapEnded(absl::Time now);
  // Every few seconds: the scheduler's reason why each queued job waits becomes its message.
  void ExplainWaits(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AdoptOrphans(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads the jobs the database has active into orphans_ once; false when it cannot.
  bool LoadOrphans() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // What every rank's Assignment shares (the dataset sha and the fine-tuning checkpoint are
  // looked up once per placement); rank and threads are set per rank. Errors end the job FAILED.
  absl::StatusOr<gantry::v1::Assignment> MakeAssignment(const ActiveJob& job,
                                                        const scheduler::Placement& placement);
  // Moves the job to `to` unless it already left `from`; marks it ended and tells its other ranks
  // to stop when `to` is terminal.
  void EndJob(const std::string& job_id, const std::vector<gantry::v1::JobState>& from,
              gantry::v1::JobState to, const std::string& reason, const std::string& message);
  void SendCancellation(const ActiveJob& job, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandleRankStatus(const std::string& worker_id, const std::string& job_id,
                                const gantry::v1::RankStatus& status);
  absl::Status HandleProgress(const std::string& job_id, const gantry::v1::Progress& progress);
  absl::Status HandleResult(const std::string& job_id, const gantry::v1::JobResult& result);
  absl::Status RegisterModel(const ActiveJob& job, const gantry::v1::JobResult& result,
                             std::string* model_ref);
  void AppendEventOrLog(const std::string& job_id, const gantry::v1::JobEvent& event);

  Backend& backend_;
  GenerationRouter* const router_;  // not owned; may be null
  absl::Mutex mu_;
  scheduler::Scheduler scheduler_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, gantry::v1::RegisterRequest> registered_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<WorkerLink>> links_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, ActiveJob> active_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> queued_ ABSL_GUARDED_BY(mu_);  // job ids submitted to the scheduler
  std::map<std::string, std::string> wait_reasons_ ABSL_GUARDED_BY(mu_);  // last message written
  absl::Time last_explained_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Jobs found active in the database at start, waiting for a worker to claim them.
  std::map<std::string, gantry::v1::Job> orphans_ ABSL_GUARDED_BY(mu_);
  absl::Time started_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool orphans_loaded_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex loop_mu_;
  bool stop_ ABSL_GUARDED_BY(loop_mu_) = false;
  std::thread thread_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_JOB_COORDINATOR_H_
