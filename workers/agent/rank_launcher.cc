#include "workers/agent/rank_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/atomic_file.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "workers/agent/control_pipe.h"
#include "workers/agent/daemon_metrics.h"

extern char** environ;

namespace gantry::agent {
namespace {

namespace v1 = ::gantry::v1;

// The fd number the control pipe has in the rank process.
constexpr int kChildControlFd = 3;
constexpr int kTailLines = 20;
constexpr size_t kTailBytes = 8192;

bool ValidJobId(const std::string& id) {
  if (id.empty() || id.size() > 128 || id[0] == '.') return false;
  for (char c : id) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// The last kTailLines lines of the file (at most kTailBytes), trimmed.
std::string Tail(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start =
      size > static_cast<std::streamoff>(kTailBytes) ? size - kTailBytes : 0;
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());  // a partial first line
  while (!lines.empty() && absl::StripAsciiWhitespace(lines.back()).empty()) lines.pop_back();
  if (lines.size() > static_cast<size_t>(kTailLines)) {
    lines.erase(lines.begin(), lines.end() - kTailLines);
  }
  return absl::StrJoin(lines, "\n");
}

// The rank credential's file in a rank's work dir.
constexpr char kRankCredentialFile[] = "rank.credential";

// Writes a constant message to fd 2 and exits; only async-signal-safe calls (used after fork).
[[noreturn]] void ChildFail(const char* message) {
  const ssize_t ignored = write(STDERR_FILENO, message, strlen(message));
  (void)ignored;
  _exit(127);
}

// The work dir <work_root>/<job_id>/rank-<r> (attempt 0) or
// <work_root>/<job_id>/attempt-<a>/rank-<r>, created private (0700), with the assignment written
// into it without its credential, and the rank credential alone in rank.credential (0600).
absl::StatusOr<std::string> PrepareWorkDir(const std::string& work_root,
                                           const v1::Assignment& assignment) {
  const std::string work_dir =
      assignment.attempt() > 0
          ? absl::StrCat(work_root, "/", assignment.job_id(), "/attempt-", assignment.attempt(),
                         "/rank-", assignment.rank())
          : absl::StrCat(work_root, "/", assignment.job_id(), "/rank-", assignment.rank());
  std::error_code ec;
  std::filesystem::create_directories(work_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", work_dir, ": ", ec.message()));
  std::filesystem::permissions(work_dir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot chmod ", work_dir, ": ", ec.message()));
  // The rank credential in its own file (the rank's client reads it from there); the assignment,
  // which carries the rendezvous secret, 0600 as well.
  RETURN_IF_ERROR(WriteFileAtomically(work_dir + "/" + kRankCredentialFile,
                                      {assignment.rank_credential()}, ExistingFile::kReplace,
                                      0600));
  v1::Assignment stored = assignment;
  stored.clear_rank_credential();
  RETURN_IF_ERROR(WriteFileAtomically(work_dir + "/assignment.pb", {stored.SerializeAsString()},
                                      ExistingFile::kReplace, 0600));
  return work_dir;
}

// The rank's log (appended) and its control pipe, both close-on-exec; nothing stays open on error.
absl::Status OpenRankFds(const std::string& log_path, int* log_fd, int pipe_fds[2]) {
  *log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (*log_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", log_path, ": ", strerror(errno)));
  }
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    close(*log_fd);
    return absl::InternalError(absl::StrCat("pipe2 failed: ", strerror(errno)));
  }
  return absl::OkStatus();
}

// Everything the child needs to exec, prepared before fork (after it only async-signal-safe calls
// are allowed). argv and envp point into args and env: build in place, do not copy.
struct ChildExec {
  std::vector<std::string> args, env;
  std::vector<char*> argv, envp;
  int max_fd = 0;
  std::string exec_failed;

  // gpu: the GPU id the rank runs on; -1 = the CPU.
  void Build(const RankLauncherOptions& options, const std::string& work_dir, int gpu) {
    const std::string binary =
        options.rank_binary.empty() ? std::string("/proc/self/exe") : options.rank_binary;
    args = {binary,
            "rank",
            "--assignment=" + work_dir + "/assignment.pb",
            absl::StrCat("--control-fd=", kChildControlFd),
            "--server=" + options.server,
            "--cache-dir=" + options.cache_dir,
            "--file-roots=" + options.file_roots,
            absl::StrCat("--cache-max-bytes=", options.cache_max_bytes),
            "--work-dir=" + work_dir,
            absl::StrCat("--credential-file=", work_dir, "/", kRankCredentialFile),
            gpu < 0 ? std::string("--device=cpu") : absl::StrCat("--device=cuda:", gpu)};
    if (!options.tls_files.ca_cert.empty())
      args.push_back("--ca-cert=" + options.tls_files.ca_cert);
    if (!options.tls_files.cert.empty()) {
      args.push_back("--tls-cert=" + options.tls_files.cert);
      args.push_back("--tls-key=" + options.tls_files.key);
    }
    args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
    // No secret of the daemon reaches a rank through its environment.
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      if (strncmp(*e, "GANTRY_JOIN_TOKEN=", 18) != 0) env.emplace_back(*e);
    }
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const long open_max = sysconf(_SC_OPEN_MAX);
    max_fd = open_max > 0 && open_max < 65536 ? static_cast<int>(open_max) : 65536;
    exec_failed = "gantry-worker: exec " + binary + " failed\n";
  }
};

// The child side of fork: own process group, default signals, fds 0..3 placed (stdin /dev/null,
// stdout and stderr the log, 3 the control pipe), every other fd closed, then exec. Only
// async-signal-safe calls.
[[noreturn]] void RunChild(const ChildExec& exec, int pipe_write_fd, int log_fd,
                           bool die_with_parent, pid_t parent) {
  if (die_with_parent) {
    // The kernel kills the rank when the thread that launched it goes (kill -9 of the daemon
    // included); in WorkerAgent that is the session thread, which lives as long as the daemon.
    // The getppid check closes the race with a parent that died before the prctl.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
  }
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGUSR1, SIG_DFL);
  // Move the fds out of the way of 0..3 first, then place them.
  const int pipe_w = fcntl(pipe_write_fd, F_DUPFD_CLOEXEC, 10);
  const int log_w = fcntl(log_fd, F_DUPFD_CLOEXEC, 10);
  const int null_r = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (pipe_w < 0 || log_w < 0 || null_r < 0) ChildFail("gantry-worker: fd setup failed\n");
  if (dup2(null_r, STDIN_FILENO) < 0 || dup2(log_w, STDOUT_FILENO) < 0 ||
      dup2(log_w, STDERR_FILENO) < 0 || dup2(pipe_w, kChildControlFd) < 0) {
    ChildFail("gantry-worker: dup2 failed\n");
  }
  // dup2 clears close-on-exec on the targets; every other fd of the daemon goes.
  if (close_range(kChildControlFd + 1, ~0U, 0) != 0) {
    for (int fd = kChildControlFd + 1; fd < exec.max_fd; ++fd) close(fd);
  }
  execve(exec.argv[0], exec.argv.data(), exec.envp.data());
  ChildFail(exec.exec_failed.c_str());
}

// Forks the rank; the parent closes its copies of the child's ends (the log, the pipe's write end).
absl::StatusOr<pid_t> Spawn(const ChildExec& exec, int log_fd, const int pipe_fds[2],
                            bool die_with_parent) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(log_fd);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return absl::InternalError(absl::StrCat("fork failed: ", strerror(err)));
  }
  if (pid == 0) RunChild(exec, pipe_fds[1], log_fd, die_with_parent, parent);
  setpgid(pid, pid);  // also in the parent, so signals can target the group at once
  close(pipe_fds[1]);
  close(log_fd);
  return pid;
}

}  // namespace

struct RankLauncher::Rank {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  pid_t pid = -1;  // also the process group id
  int gpu = -1;    // the GPU id it holds; -1 = none (a CPU worker)
  int pipe_fd = -1;
  std::string log_path;
  std::thread thread;
  bool term_requested = false;  // guarded by the launcher's mu_
  absl::Time term_at;           // guarded by the launcher's mu_
};

RankLauncher::RankLauncher(RankLauncherOptions options, Sink sink)
    : options_(std::move(options)), sink_(std::move(sink)) {}

RankLauncher::~RankLauncher() {
  StopAll();
  absl::MutexLock lock(&mu_);
  CollectFinishedLocked();
}

absl::Status RankLauncher::Launch(const v1::Assignment& given) {
  if (!ValidJobId(given.job_id())) {
    return absl::InvalidArgumentError(
        absl::StrCat("assignment.job_id \"", given.job_id(), "\" is not a valid job id"));
  }
  if (given.attempt() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("assignment.attempt ", given.attempt(), " is negative"));
  }
  v1::Assignment assignment = given;
  if (assignment.collective_timeout_ms() == 0) {
    assignment.set_collective_timeout_ms(options_.default_collective_timeout_ms);
  }
  absl::StatusOr<int> gpu = ReserveSlot(assignment);
  if (!gpu.ok()) return gpu.status();
  absl::Cleanup release = [this, held = *gpu] { ReleaseGpu(held); };
  absl::StatusOr<std::string> work_dir = PrepareWorkDir(options_.work_root, assignment);
  if (!work_dir.ok()) return work_dir.status();
  const std::string log_path = *work_dir + "/rank.log";
  int log_fd = -1;
  int pipe_fds[2];
  if (absl::Status s = OpenRankFds(log_path, &log_fd, pipe_fds); !s.ok()) return s;
  ChildExec exec;
  exec.Build(options_, *work_dir, *gpu);
  absl::StatusOr<pid_t> pid = Spawn(exec, log_fd, pipe_fds, options_.die_with_daemon);
  if (!pid.ok()) return pid.status();
  std::move(release).Cancel();  // the rank holds its GPU until it is reaped
  StartSupervising(assignment, *pid, pipe_fds[0], log_path, *gpu);
  return absl::OkStatus();
}

absl::StatusOr<int> RankLauncher::ReserveSlot(const v1::Assignment& assignment) {
  const std::string& job_id = assignment.job_id();
  absl::MutexLock lock(&mu_);
  CollectFinishedLocked();
  if (stopping_) return absl::UnavailableError("the worker is shutting down");
  if (ranks_.count(RankKey(job_id, assignment.attempt(), assignment.rank())) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("rank ", assignment.rank(), " of ", job_id,
                                                 " (attempt ", assignment.attempt(),
                                                 ") already runs here"));
  }
  if (options_.max_ranks > 0 && static_cast<int>(ranks_.size()) >= options_.max_ranks) {
    return absl::ResourceExhaustedError(
        absl::StrCat("all ", options_.max_ranks, " slot(s) of this worker are busy; rank ",
                     assignment.rank(), " of ", job_id, " was not started"));
  }
  if (options_.gpu_ids.empty()) return -1;
  for (int gpu : options_.gpu_ids) {
    if (gpus_in_use_.insert(gpu).second) return gpu;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("all ", options_.gpu_ids.size(), " GPU(s) of this worker are in use; rank ",
                   assignment.rank(), " of ", job_id, " was not started"));
}

void RankLauncher::ReleaseGpu(int gpu) {
  if (gpu < 0) return;
  absl::MutexLock lock(&mu_);
  gpus_in_use_.erase(gpu);
}

void RankLauncher::StartSupervising(const v1::Assignment& assignment, pid_t pid, int pipe_fd,
                                    const std::string& log_path, int gpu) {
  const std::string& job_id = assignment.job_id();
  auto rank = std::make_unique<Rank>();
  rank->job_id = job_id;
  rank->attempt = assignment.attempt();
  rank->rank = assignment.rank();
  rank->pid = pid;
  rank->pipe_fd = pipe_fd;
  rank->log_path = log_path;
  rank->gpu = gpu;
  Rank* raw = rank.get();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) SignalLocked(raw);  // StopAll began while this rank was being spawned
    ranks_.emplace(RankKey(job_id, assignment.attempt(), assignment.rank()), std::move(rank));
  }
  GANTRY_LOG(INFO) << absl::StrCat("started rank ", assignment.rank(), " of ", job_id, " attempt ",
                                   assignment.attempt(), " on ",
                                   gpu < 0 ? std::string("the CPU") : absl::StrCat("GPU ", gpu),
                                   " (pid ", pid, ", log ", log_path, ")");
  v1::WorkerMessage starting;
  starting.set_job_id(job_id);
  starting.set_attempt(assignment.attempt());
  starting.mutable_rank_status()->set_rank(assignment.rank());
  starting.mutable_rank_status()->set_phase(v1::RANK_PHASE_STARTING);
  sink_(std::move(starting));
  absl::MutexLock lock(&mu_);
  raw->thread = std::thread([this, raw] { Supervise(raw); });
}

void RankLauncher::Supervise(Rank* r) {
  ControlPipeReader reader(r->pipe_fd);
  bool eof = false;
  bool reaped = false;
  bool killed = false;
  int status = 0;
  absl::Time reaped_at;
  std::string last_error;
  while (true) {
    if (!eof) {
      pollfd p{r->pipe_fd, POLLIN, 0};
      if (poll(&p, 1, 50) > 0) {
        absl::StatusOr<std::optional<v1::WorkerMessage>> next = reader.Next();
        if (!next.ok()) {
          GANTRY_LOG(ERROR) << absl::StrCat("rank ", r->rank, " of ", r->job_id,
                                            ": control pipe unusable: ", next.status().ToString());
          eof = true;
        } else if (!next->has_value()) {
          eof = true;
        } else {
          v1::WorkerMessage message = std::move(**next);
          if (message.has_rank_metrics()) {
            // For this daemon's /metrics page only; the server never sees it.
            const absl::Status recorded =
                RecordRankMetrics(r->job_id, r->rank, message.rank_metrics());
            if (!recorded.ok()) GANTRY_LOG(WARNING) << recorded.message();
            continue;
          }
          message.set_job_id(r->job_id);
          message.set_attempt(r->attempt);
          if (message.has_log() && message.log().level() == "ERROR") {
            last_error = message.log().text();
          }
          sink_(std::move(message));
        }
      }
    } else if (!reaped) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    if (!reaped) {
      const pid_t w = waitpid(r->pid, &status, WNOHANG);
      if (w == r->pid || (w < 0 && errno == ECHILD)) {
        reaped = true;
        reaped_at = absl::Now();
        kill(-r->pid, SIGKILL);  // whatever the rank left behind in its group
      }
    }
    if (!reaped && !killed) {
      absl::MutexLock lock(&mu_);
      if (r->term_requested && absl::Now() - r->term_at >= options_.kill_grace) {
        kill(-r->pid, SIGKILL);
        killed = true;
      }
    }
    // After the exit, drain what the rank wrote; give up on a pipe held open by an escapee.
    if (reaped && (eof || absl::Now() - reaped_at > absl::Seconds(2))) break;
  }
  close(r->pipe_fd);

  v1::WorkerMessage exited;
  exited.set_job_id(r->job_id);
  exited.set_attempt(r->attempt);
  v1::RankStatus* rs = exited.mutable_rank_status();
  rs->set_rank(r->rank);
  rs->set_phase(v1::RANK_PHASE_EXITED);
  if (WIFEXITED(status)) {
    rs->set_exit_code(WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    rs->set_exit_code(-WTERMSIG(status));
  } else {
    rs->set_exit_code(-1);
  }
  rs->set_message(!last_error.empty() ? last_error : Tail(r->log_path));
  GANTRY_LOG(INFO) << absl::StrCat("rank ", r->rank, " of ", r->job_id, " attempt ", r->attempt,
                                   " exited with code ", rs->exit_code());
  ForgetRankGauges(r->job_id, r->rank);
  {
    // The slot and its GPU are free from here on; StopAll joins this thread, so the report below
    // still lands before StopAll returns.
    absl::MutexLock lock(&mu_);
    if (r->gpu >= 0) gpus_in_use_.erase(r->gpu);
    auto it = ranks_.find(RankKey(r->job_id, r->attempt, r->rank));
    if (it != ranks_.end() && it->second.get() == r) {
      finished_.push_back(std::move(it->second));
      ranks_.erase(it);
    }
  }
  sink_(std::move(exited));
}

void RankLauncher::CollectFinishedLocked() {
  for (std::unique_ptr<Rank>& r : finished_) {
    if (r->thread.joinable()) r->thread.join();
  }
  finished_.clear();
}

void RankLauncher::SignalLocked(Rank* r) {
  if (r->term_requested) return;
  r->term_requested = true;
  r->term_at = absl::Now();
  kill(-r->pid, SIGTERM);
}

int RankLauncher::Cancel(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (auto& [key, rank] : ranks_) {
    if (std::get<0>(key) != job_id) continue;
    SignalLocked(rank.get());
    ++n;
  }
  if (n > 0) GANTRY_LOG(INFO) << absl::StrCat("cancelling ", n, " rank(s) of ", job_id);
  return n;
}

int RankLauncher::CheckpointAndStop(const std::string& job_id, int attempt) {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (auto& [key, rank] : ranks_) {
    if (std::get<0>(key) != job_id || (attempt >= 0 && std::get<1>(key) != attempt)) continue;
    kill(-rank->pid, SIGUSR1);
    ++n;
  }
  if (n > 0) {
    GANTRY_LOG(INFO) << absl::StrCat(
        "asked ", n, " rank(s) of ", job_id,
        attempt >= 0 ? absl::StrCat(" attempt ", attempt) : std::string(),
        " to checkpoint and stop");
  }
  return n;
}

int RankLauncher::CheckpointAndStopAll() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, rank] : ranks_) kill(-rank->pid, SIGUSR1);
  if (!ranks_.empty())
    GANTRY_LOG(INFO) << absl::StrCat("asked ", ranks_.size(), " rank(s) to checkpoint and stop");
  return static_cast<int>(ranks_.size());
}

void RankLauncher::StopAll() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (auto& [key, rank] : ranks_) SignalLocked(rank.get());
  mu_.Await(absl::Condition(
      +[](std::map<RankKey, std::unique_ptr<Rank>>* ranks) { return ranks->empty(); }, &ranks_));
  CollectFinishedLocked();
}

int RankLauncher::live_ranks() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(ranks_.size());
}

std::vector<std::string> RankLauncher::running_jobs() const {
  absl::MutexLock lock(&mu_);
  std::set<std::string> jobs;
  for (const auto& [key, rank] : ranks_) jobs.insert(std::get<0>(key));
  return std::vector<std::string>(jobs.begin(), jobs.end());
}

std::vector<std::tuple<std::string, int, int>> RankLauncher::live_rank_keys() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::tuple<std::string, int, int>> keys;
  keys.reserve(ranks_.size());
  for (const auto& [key, rank] : ranks_) keys.push_back(key);
  return keys;
}

std::vector<int> RankLauncher::gpus_in_use() const {
  absl::MutexLock lock(&mu_);
  return std::vector<int>(gpus_in_use_.begin(), gpus_in_use_.end());
}

bool RankLauncher::WaitIdle(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](const std::map<RankKey, std::unique_ptr<Rank>>* ranks) { return ranks->empty(); },
          &ranks_),
      timeout);
}

}  // namespace gantry::agent
