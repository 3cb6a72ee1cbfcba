// RankCommand: `gantry-worker rank`, one rank of a training job as a child process of the worker
// daemon: reads its Assignment file, runs a runner::RankRunner that reports through the control
// pipe, and maps the outcome to the exit code of base/failure_policy.h (0 ok, 2 bad assignment,
// 143 cancelled, 200 checkpointed and stopped, ...).
#ifndef GANTRY_WORKERS_APP_RANK_COMMAND_H_
#define GANTRY_WORKERS_APP_RANK_COMMAND_H_

#include <cstdint>
#include <string>

#include "base/tls_config.h"

namespace gantry::app {

struct RankCommandOptions {
  std::string assignment;  // binary gantry.v1.Assignment
  int control_fd = -1;     // pipe to the daemon (agent::WriteControlMessage frames)
  std::string server;      // gantry-server host:port
  std::string cache_dir;
  int64_t cache_max_bytes = 0;  // the daemon's --cache-max-bytes (0 = no limit)
  std::string work_dir;
  std::string file_roots;           // the daemon's --file-roots (comma-separated; empty = none)
  std::string bind_host;            // optional: this worker's advertise host (Gloo on rank != 0)
  int64_t max_steps_per_epoch = 0;  // test hook
  // The device the daemon gave this rank: "cpu" or "cuda:N" (one GPU per rank).
  std::string device = "cpu";
  // The file (mode 0600, in the rank's private work dir) holding the rank credential of this job
  // attempt, which the rank sends to the server; never the credential itself on argv or in env.
  std::string credential_file;
  TlsFiles tls_files;  // the daemon's --ca-cert, --tls-cert, --tls-key
};

// Runs the rank; returns the process exit code (gantry::RankExitCodeFor). Installs SIGTERM/SIGINT
// handlers: the rank stops at the next step boundary, and the process exits with 143 at the latest
// 5 s after the signal. SIGUSR1 asks for checkpoint-and-stop: at the next step boundary every rank
// saves and uploads a checkpoint and exits with 200 (kExitPreempted); the daemon bounds the wait.
int RunRankCommand(const RankCommandOptions& options);

}  // namespace gantry::app

#endif  // GANTRY_WORKERS_APP_RANK_COMMAND_H_
