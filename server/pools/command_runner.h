// CommandRunner: runs an operator's provisioning command (argv, never a shell string) to its end
// or its timeout, with extra environment and stdin, and keeps the tail of its output for errors.
#ifndef GANTRY_SERVER_POOLS_COMMAND_RUNNER_H_
#define GANTRY_SERVER_POOLS_COMMAND_RUNNER_H_

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gantry::server {

// One run.
struct CommandRequest {
  std::vector<std::string> argv;           // argv[0]: a path (absolute, or found on PATH)
  std::map<std::string, std::string> env;  // added to (or replacing in) the server's environment
  std::string stdin_data;                  // given on stdin (empty: /dev/null)
  absl::Duration timeout = absl::Seconds(60);  // the whole process group is SIGKILLed after it
  // When set and it turns true (the server is stopping), the run ends as after its timeout.
  const std::atomic<bool>* cancelled = nullptr;
};

// How it ended.
struct CommandOutcome {
  bool exited = false;  // exit_code valid
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  std::string output;  // the last 4 KiB of stdout and stderr together

  bool ok() const { return exited && exit_code == 0; }
  // "exited with code 3: <last output line>", "timed out after 5s", ...
  std::string Describe() const;
};

// Stateless and thread-safe.
class CommandRunner {
 public:
  // fork + execvp in a new process group; stdout and stderr go to an unlinked temporary file (not
  // a pipe: daemons the command leaves running in the background keep it open). Blocks until the
  // command exits or the timeout passes (then SIGKILL to its process group; background processes
  // it started in their own session survive). INTERNAL when it cannot be started.
  static absl::StatusOr<CommandOutcome> Run(const CommandRequest& request);
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_POOLS_COMMAND_RUNNER_H_
