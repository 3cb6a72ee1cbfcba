// DaemonProcess: the worker daemon (agent_test_daemon, the same DaemonMain as `gantry-worker
// daemon`) as a real child process for tests, stderr captured to a file.
#ifndef GANTRY_TESTS_AGENT_DAEMON_PROCESS_H_
#define GANTRY_TESTS_AGENT_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace gantry::testing {

class DaemonProcess {
 public:
  // Starts AGENT_TEST_DAEMON_BINARY with `args`; stderr (and stdout) go to `log_path`.
  DaemonProcess(const std::vector<std::string>& args, const std::string& log_path);
  // SIGKILLs it if still running.
  ~DaemonProcess();

  pid_t pid() const { return pid_; }
  // True while the process has not exited (reaps it when it has).
  bool Running();
  // Sends `signal` and waits up to timeout_ms for the exit; returns the exit code (128 + signal
  // when killed by one), -1 on timeout.
  int Signal(int signal, int timeout_ms);
  // Waits for the exit; as above.
  int Wait(int timeout_ms);
  std::string Log() const;

  // Runs the daemon to completion; returns its exit code and its output in *output.
  static int RunToExit(const std::vector<std::string>& args, std::string* output);

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  bool exited_ = false;
  int exit_code_ = -1;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_AGENT_DAEMON_PROCESS_H_
