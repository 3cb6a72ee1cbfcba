// RankLauncher: runs each assigned rank as its own child process (fork + exec, own process group)
// and supervises it from one thread per rank: forwards the WorkerMessages the rank writes to its
// control pipe, escalates SIGTERM to SIGKILL on cancellation, asks for checkpoint-and-stop with
// SIGUSR1, reaps it and reports its exit. Ranks are keyed by (job, attempt, rank), so a restarted
// job's new rank can start while the old attempt's is still being reaped. A crashing rank never
// takes the daemon down.
#ifndef GANTRY_WORKERS_AGENT_RANK_LAUNCHER_H_
#define GANTRY_WORKERS_AGENT_RANK_LAUNCHER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/tls_config.h"
#include "gantry/v1/worker.pb.h"

namespace gantry::agent {

struct RankLauncherOptions {
  // Program run per rank; empty = this executable (/proc/self/exe, i.e. gantry-worker).
  std::string rank_binary;
  std::vector<std::string> extra_args;  // appended to every rank's command line
  std::string server;                   // passed as --server
  std::string cache_dir;                // passed as --cache-dir
  std::string file_roots;  // passed as --file-roots (comma-separated; empty = file:// refused)
  // Passed as --cache-max-bytes: the rank's dataset cache evicts down to it after a fill.
  int64_t cache_max_bytes = 0;
  // A rank's scratch is <work_root>/<job_id>/rank-<r> for attempt 0, else
  // <work_root>/<job_id>/attempt-<a>/rank-<r>.
  std::string work_root;
  absl::Duration kill_grace = absl::Seconds(5);  // SIGTERM -> SIGKILL
  int max_ranks = 0;                             // live ranks at once; 0 = unlimited
  // A GPU worker's GPU ids: each rank gets one that no live rank holds, as --device=cuda:N, and
  // frees it when it is reaped. Empty: a CPU worker, every rank gets --device=cpu.
  std::vector<int> gpu_ids;
  // SIGKILL ranks when the daemon dies (kill -9 included) instead of leaving them orphaned.
  bool die_with_daemon = false;
  // Written into assignments whose collective_timeout_ms is 0 (0 here: left as it is).
  int default_collective_timeout_ms = 0;
  TlsFiles tls_files;  // paths passed as --ca-cert, --tls-cert, --tls-key when set
};

class RankLauncher {
 public:
  // Receives every message for the Connect stream, job_id and attempt set: RANK_PHASE_STARTING
  // (from Launch), the rank's own frames in pipe order, then RANK_PHASE_EXITED last. Called from
  // Launch's caller and from supervisor threads, never with the launcher's lock held; must be
  // thread-safe.
  using Sink = std::function<void(gantry::v1::WorkerMessage)>;

  RankLauncher(RankLauncherOptions options, Sink sink);
  // Stops every rank (StopAll) and joins the supervisor threads.
  ~RankLauncher();
  RankLauncher(const RankLauncher&) = delete;
  RankLauncher& operator=(const RankLauncher&) = delete;

  // Writes <work dir>/assignment.pb and starts `<rank_binary> rank --assignment=<path>
  // --control-fd=3 --server=... --cache-dir=... --cache-max-bytes=N --work-dir=<work dir>
  // --device=cpu|cuda:N` with stdout and stderr appended to <work dir>/rank.log. ALREADY_EXISTS
  // when this (job, attempt, rank) is still running here, RESOURCE_EXHAUSTED when max_ranks ranks
  // are live or every GPU of gpu_ids is held by a live rank, INVALID_ARGUMENT
  // for a job id unfit for a path, UNAVAILABLE after StopAll began, INTERNAL when no process could
  // be started (nothing is sent to the sink then). An exec failure is reported as RANK_PHASE_EXITED
  // with exit code 127. With die_with_daemon the kernel SIGKILLs the rank if the calling thread
  // exits first (PR_SET_PDEATHSIG): then call Launch from a thread that lives as long as the
  // launcher.
  absl::Status Launch(const gantry::v1::Assignment& assignment);

  // Sends SIGTERM to the process group of every rank of `job_id`, all attempts (SIGKILL after
  // kill_grace); returns how many ranks were signalled. Slots free up as the processes are reaped.
  int Cancel(const std::string& job_id);

  // Asks the ranks of `job_id` and `attempt` (attempt < 0: every attempt) to checkpoint and exit:
  // SIGUSR1 to their process groups, no escalation (the caller decides how long to wait). Returns
  // how many ranks were signalled.
  int CheckpointAndStop(const std::string& job_id, int attempt);
  // The same for every live rank (a preemption notice).
  int CheckpointAndStopAll();

  // Cancels every rank, refuses further launches and returns once all are reaped and reported.
  void StopAll();

  // Ranks started and not yet reaped (a slot is free once its process is reaped; its
  // RANK_PHASE_EXITED reaches the sink right after).
  int live_ranks() const;
  // Distinct job ids with live ranks, sorted.
  std::vector<std::string> running_jobs() const;
  // Every live rank as (job id, attempt, rank), sorted.
  std::vector<std::tuple<std::string, int, int>> live_rank_keys() const;
  // The GPU ids held by live ranks (and by launches under way), sorted; empty on a CPU worker.
  std::vector<int> gpus_in_use() const;
  // Waits until no rank is live (see live_ranks); false on timeout.
  bool WaitIdle(absl::Duration timeout) const;

 private:
  struct Rank;

  // Launch's checks under the lock: not stopping, this (job, rank) not running, a free slot; on a
  // GPU worker also takes a free GPU and returns its id (-1 on a CPU worker), held until
  // ReleaseGpu or the rank's reaping.
  absl::StatusOr<int> ReserveSlot(const gantry::v1::Assignment& assignment);
  void ReleaseGpu(int gpu);
  // Registers the started rank, reports RANK_PHASE_STARTING and starts its supervisor thread.
  void StartSupervising(const gantry::v1::Assignment& assignment, pid_t pid, int pipe_fd,
                        const std::string& log_path, int gpu);
  // The supervisor thread of one rank.
  void Supervise(Rank* rank);
  // Joins supervisor threads that have finished and forgets their ranks.
  void CollectFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SignalLocked(Rank* rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RankLauncherOptions options_;
  const Sink sink_;
  mutable absl::Mutex mu_;
  // Keyed by (job id, attempt, rank); owns the supervisor threads.
  using RankKey = std::tuple<std::string, int, int>;
  std::map<RankKey, std::unique_ptr<Rank>> ranks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Rank>> finished_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // GPU ids of options_.gpu_ids held by a live rank or a launch under way.
  std::set<int> gpus_in_use_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_RANK_LAUNCHER_H_
