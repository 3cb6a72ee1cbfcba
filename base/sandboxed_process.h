// SandboxedProcess: runs a helper binary on an untrusted file in a short-lived child process with
// resource limits and no network, so a parser bug or a memory bomb costs the child, never the
// caller (gantry-server's upload inspection, gantry-worker's checkpoint verification).
#ifndef GANTRY_BASE_SANDBOXED_PROCESS_H_
#define GANTRY_BASE_SANDBOXED_PROCESS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gantry {

// What the child may use. A limit of 0 leaves that resource at the caller's limit (e.g. address
// space under AddressSanitizer, which reserves terabytes of shadow memory).
struct SandboxLimits {
  int64_t address_space_bytes = int64_t{1} << 30;  // RLIMIT_AS
  int64_t cpu_seconds = 60;                        // RLIMIT_CPU (SIGXCPU, then SIGKILL 1 s later)
  int64_t open_files = 32;                         // RLIMIT_NOFILE
  int64_t file_size_bytes = 1;  // RLIMIT_FSIZE: the child writes no files (0 is "no limit" here)
  bool isolate_network = true;  // unshare(CLONE_NEWUSER | CLONE_NEWNET), best effort
};

// One run of a helper.
struct SandboxRequest {
  std::string binary;             // absolute path of the helper
  std::vector<std::string> args;  // argv[1..]
  // The child's whole environment, "NAME=value" each; nothing else of the caller's reaches it.
  std::vector<std::string> environment;
  // Given to the child as file descriptor 3 (the untrusted input, opened by the caller; the child
  // never sees its path). -1: none. stdin is /dev/null, stderr is discarded.
  int input_fd = -1;
  SandboxLimits limits;
  absl::Duration timeout = absl::Seconds(60);  // wall clock; the child is SIGKILLed after it
  size_t max_output_bytes = 64 << 10;          // stdout read at most; more kills the child
};

// How a run ended.
struct SandboxResult {
  bool exited = false;  // exit_code is valid
  int exit_code = -1;
  int signal = 0;          // the signal that killed the child (SIGKILL for rlimits and timeouts)
  bool timed_out = false;  // killed because the timeout passed
  bool output_overflow = false;   // killed because stdout exceeded max_output_bytes
  bool network_isolated = false;  // the child ran in its own network namespace
  std::string output;             // stdout (at most max_output_bytes)
};

// Runs helpers in children. Stateless and thread-safe: any number of runs may go on at once.
class SandboxedProcess {
 public:
  // fork + execve of request.binary with request.environment only, every other file descriptor
  // closed, the limits applied, core dumps off, the child in its own process group and killed when
  // the caller dies (PR_SET_PDEATHSIG). Blocks until the child ended and was reaped. The child is
  // always reaped, also on a timeout. Errors: INTERNAL when the child cannot be created or
  // request.binary cannot be executed (the message names the binary: for operators' logs, not for
  // clients).
  static absl::StatusOr<SandboxResult> Run(const SandboxRequest& request);

  // Run with the file at `path` opened read-only as the child's descriptor 3 (request.input_fd is
  // replaced) and closed afterwards. NOT_FOUND when the file cannot be opened (the message names
  // no path), else as Run.
  static absl::StatusOr<SandboxResult> RunOnFile(const std::string& path, SandboxRequest request);

  // "exited with code 3", "killed by signal 9 (Killed)", "timed out after 5s", ...
  static std::string Describe(const SandboxResult& result);
};

}  // namespace gantry

#endif  // GANTRY_BASE_SANDBOXED_PROCESS_H_
