#include "workers/app/rank_command.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/failure_policy.h"
#include "base/file_roots.h"
#include "base/log.h"
#include "base/secret_file.h"
#include "workers/agent/control_pipe.h"
#include "workers/gan/device.h"
#include "workers/runner/rank_plan.h"
#include "workers/runner/rank_runner.h"

namespace gantry::app {
namespace {

// Lock-free atomics: set from signal handlers (async-signal-safe), read at step boundaries.
std::atomic<bool> g_stop{false};
std::atomic<bool> g_checkpoint_and_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void OnSignal(int) { g_stop.store(true); }
void OnCheckpointAndStop(int) { g_checkpoint_and_stop.store(true); }

// Exits the process with 143 when a stop was requested and the rank has not ended within the
// grace period (a long step, a blocked collective or download).
void Watchdog() {
  while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::seconds(5));
  GANTRY_LOG(ERROR) << "still running 5 s after SIGTERM; exiting";
  _exit(143);
}

// The rank credential from --credential-file: at most 1 KiB, private (the daemon writes it 0600),
// surrounding whitespace trimmed. Errors do not name the path.
absl::StatusOr<std::string> ReadRankCredential(const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "--credential-file: is required (the daemon writes the rank credential there)");
  }
  absl::StatusOr<std::string> secret =
      ReadSecretFile(path, "--credential-file", "the rank credential", 1, 1024);
  if (secret.ok()) return secret;
  // The job's log carries this error to its tenant: without the worker's path.
  return absl::Status(secret.status().code(),
                      absl::StrReplaceAll(secret.status().message(), {{path, "(the daemon's file)"}}));
}

}  // namespace

int RunRankCommand(const RankCommandOptions& o) {
  signal(SIGPIPE, SIG_IGN);
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  struct sigaction checkpoint_action = {};
  checkpoint_action.sa_handler = OnCheckpointAndStop;
  sigemptyset(&checkpoint_action.sa_mask);
  sigaction(SIGUSR1, &checkpoint_action, nullptr);
  std::thread(Watchdog).detach();

  const int fd = o.control_fd;
  auto sink = [fd](const v1::WorkerMessage& message) -> absl::Status {
    if (fd < 0) return absl::OkStatus();
    return agent::WriteControlMessage(fd, message);
  };
  auto fail_early = [&](const absl::Status& status, int rank, const std::string& job_id) {
    GANTRY_LOG(ERROR) << status;
    v1::WorkerMessage log;
    log.set_job_id(job_id);
    log.mutable_log()->set_rank(rank);
    log.mutable_log()->set_level("ERROR");
    log.mutable_log()->set_text(
        absl::StrCat("rank ", rank, " refused its assignment: ", status.ToString()));
    sink(log).IgnoreError();
    if (rank == 0) {
      v1::WorkerMessage result;
      result.set_job_id(job_id);
      result.mutable_result()->set_success(false);
      result.mutable_result()->set_message(log.log().text());
      result.mutable_result()->set_code_version(runner::CodeVersion());
      result.mutable_result()->set_exit_code(kExitInvalidSpec);
      sink(result).IgnoreError();
    }
    return static_cast<int>(kExitInvalidSpec);  // the assignment cannot run anywhere
  };
  if (o.control_fd < 0) {
    return fail_early(absl::InvalidArgumentError("--control-fd: a pipe fd is required"), -1, "");
  }
  if (o.server.empty()) {
    return fail_early(absl::InvalidArgumentError("--server: host:port is required"), -1, "");
  }
  if (o.work_dir.empty() || o.cache_dir.empty()) {
    return fail_early(absl::InvalidArgumentError("--work-dir and --cache-dir are required"), -1,
                      "");
  }
  absl::StatusOr<TlsConfig> tls = LoadTlsConfig(o.tls_files);
  if (!tls.ok()) return fail_early(tls.status(), -1, "");
  absl::StatusOr<v1::Assignment> assignment = runner::ReadAssignmentFile(o.assignment);
  if (!assignment.ok()) {
    return fail_early(absl::InvalidArgumentError(assignment.status().message()), -1, "");
  }
  absl::StatusOr<runner::RankPlan> plan = runner::PlanRank(*assignment);
  if (!plan.ok()) return fail_early(plan.status(), assignment->rank(), assignment->job_id());
  absl::StatusOr<std::string> credential = ReadRankCredential(o.credential_file);
  if (!credential.ok()) {
    return fail_early(credential.status(), assignment->rank(), assignment->job_id());
  }

  absl::StatusOr<FileRoots> file_roots = FileRoots::Parse(o.file_roots, "file-roots");
  if (!file_roots.ok()) return fail_early(file_roots.status(), -1, "");
  // The daemon's choice of device: a device this build or machine lacks ends the rank before any
  // work (the scheduler places GPU ranks only on GPU workers, so this is a misconfigured worker).
  absl::StatusOr<c10::Device> device = gan::ParseDevice(o.device, "--device");
  absl::Status device_usable = device.ok() ? gan::DeviceUsable(*device) : device.status();
  if (device_usable.ok()) device_usable = gan::MakeCurrentDevice(*device);
  if (!device_usable.ok()) {
    return fail_early(device_usable, assignment->rank(), assignment->job_id());
  }

  runner::RankRunnerOptions options;
  options.file_roots = *std::move(file_roots);
  options.server = o.server;
  options.token = *credential;
  options.tls = *std::move(tls);
  options.cache_dir = o.cache_dir;
  options.cache_max_bytes = o.cache_max_bytes;
  options.work_dir = o.work_dir;
  options.bind_host = o.bind_host;
  options.stop = &g_stop;
  options.checkpoint_and_stop = &g_checkpoint_and_stop;
  options.max_steps_per_epoch = o.max_steps_per_epoch;
  options.device = *device;
  const std::string job_id = assignment->job_id();
  const int attempt = assignment->attempt();
  runner::RankRunner runner(*std::move(plan), options,
                            [sink, job_id, attempt](const v1::WorkerMessage& message) {
                              v1::WorkerMessage stamped = message;
                              stamped.set_job_id(job_id);
                              stamped.set_attempt(attempt);
                              return sink(stamped);
                            });
  const absl::Status status = runner.Run();
  if (!status.ok()) GANTRY_LOG(ERROR) << status;
  return RankExitCodeFor(status);
}

}  // namespace gantry::app
