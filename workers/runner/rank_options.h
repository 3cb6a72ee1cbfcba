// RankRunnerOptions: what a rank process is given besides its assignment (the worker daemon's
// settings, from `gantry-worker rank`'s flags), and the sink every report goes to.
#ifndef GANTRY_WORKERS_RUNNER_RANK_OPTIONS_H_
#define GANTRY_WORKERS_RUNNER_RANK_OPTIONS_H_

#include <c10/core/Device.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/file_roots.h"
#include "base/tls_config.h"
#include "gantry/v1/worker.pb.h"
#include "workers/runner/checkpoint_verifier.h"

namespace gantry::runner {

struct RankRunnerOptions {
  std::string server;     // gantry-server host:port (datasets, checkpoints)
  std::string token;      // the worker join token
  std::string cache_dir;  // dataset cache
  // The dataset cache evicts least-recently-used entries down to this after a fill; 0 = no limit.
  int64_t cache_max_bytes = 0;
  std::string work_dir;  // checkpoints and scratch files of this rank
  // Where file:// datasets may be read from (the daemon's --file-roots); none by default.
  FileRoots file_roots;
  // Resume and initial checkpoints fetched from the server are read once in a sandboxed
  // `gantry-worker verify-checkpoint` child before this process loads them.
  CheckpointVerifierOptions verify_checkpoints;
  // Gloo's bind address on ranks != 0 (the worker's advertise host); empty = the local address
  // that routes to the rendezvous host (127.0.0.1 for a loopback rendezvous).
  std::string bind_host;
  // Set from a signal handler: the rank stops at the next step boundary with CANCELLED.
  const std::atomic<bool>* stop = nullptr;
  // Set from a signal handler (SIGUSR1): checkpoint at the next step boundary, upload, and end with
  // kExitPreempted (before training: end at once, without a checkpoint).
  const std::atomic<bool>* checkpoint_and_stop = nullptr;
  // Gloo collective and rendezvous timeout when the assignment has collective_timeout_ms 0.
  absl::Duration default_collective_timeout = absl::Minutes(2);
  // How long the upload of the final (and of a preemption) checkpoint retries UNAVAILABLE.
  absl::Duration final_upload_retry = absl::Seconds(60);
  absl::Duration progress_interval = absl::Seconds(2);
  // Test and benchmark hook (not part of the job spec): at most this many steps per epoch.
  int64_t max_steps_per_epoch = 0;
  // Channels to the server: TLS when it trusts a CA (mutual TLS when it has a certificate).
  TlsConfig tls;
  // The rank's device (workers/gan/device.h): training, validation generation and, on a cuda
  // device, NCCL instead of Gloo.
  c10::Device device = c10::Device(c10::kCPU);
};

// Receives every message the rank reports. Called from the training thread and the progress
// thread, never concurrently. A non-OK status (the daemon went away) stops the rank.
using MessageSink = std::function<absl::Status(const gantry::v1::WorkerMessage&)>;

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_RANK_OPTIONS_H_
