// DaemonProcess: the worker daemon (agent_test_daemon, the same DaemonMain as `gantry-worker
// daemon`) as a real child process for tests: a ChildProcess whose argv starts with the binary.
#ifndef GANTRY_TESTS_AGENT_DAEMON_PROCESS_H_
#define GANTRY_TESTS_AGENT_DAEMON_PROCESS_H_

#include <string>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"

namespace gantry::testing {

class DaemonProcess : public ChildProcess {
 public:
  // Starts AGENT_TEST_DAEMON_BINARY with `args`; stderr (and stdout) go to `log_path`.
  DaemonProcess(const std::vector<std::string>& args, const std::string& log_path)
      : ChildProcess(WithBinary(args), log_path) {}

  // Runs the daemon to completion; returns its exit code and its output in *output.
  static int RunToExit(const std::vector<std::string>& args, std::string* output) {
    return ChildProcess::RunToExit(WithBinary(args), output);
  }

 private:
  static std::vector<std::string> WithBinary(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {AGENT_TEST_DAEMON_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_AGENT_DAEMON_PROCESS_H_
