// CheckpointVerifier: reads a checkpoint fetched from the server completely in a short-lived,
// rlimited child (`gantry-worker verify-checkpoint`) before the daemon's model cache or a
// restarted rank loads it in-process, so a checkpoint that crashes or exhausts LibTorch's loader
// costs that child, never the daemon or the rank. Torch-free.
#ifndef GANTRY_WORKERS_RUNNER_CHECKPOINT_VERIFIER_H_
#define GANTRY_WORKERS_RUNNER_CHECKPOINT_VERIFIER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/sandboxed_process.h"

namespace gantry::runner {

struct CheckpointVerifierOptions {
  // A gantry-worker binary (it runs `<binary> verify-checkpoint --fd=3`); empty = /proc/self/exe,
  // which is gantry-worker in the daemon and in ranks.
  std::string binary;
  absl::Duration timeout = absl::Seconds(120);
  SandboxLimits limits = DefaultLimits();

  // LibTorch maps large libraries and thread stacks: 16 GiB of address space, 2 minutes of CPU.
  static SandboxLimits DefaultLimits() {
    SandboxLimits l;
    l.address_space_bytes = int64_t{16} << 30;
    l.cpu_seconds = 120;
    l.open_files = 64;
    return l;
  }
};

// OK when the child read the checkpoint at `path` (header, sha256, bounds, model config, both
// networks and optimisers) without error. The child's own refusal keeps its code, with `what`
// (e.g. "checkpoint ab12...") in place of the path; a child killed by a signal or a limit, or
// stopped at the timeout, is INVALID_ARGUMENT "<what> could not be loaded safely: ..."; a binary
// that cannot be started is INTERNAL. Thread-safe.
absl::Status VerifyCheckpointInChild(const std::string& path, const std::string& what,
                                     const CheckpointVerifierOptions& options = {});

// The child's side (`gantry-worker verify-checkpoint --fd=N`): the report it prints, "ok\n" or
// "error <code>\n<message>", for the result of reading the checkpoint.
std::string FormatVerifyReport(const absl::Status& status);

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_CHECKPOINT_VERIFIER_H_
