// ChildProcess: a long-running helper process for end-to-end tests (a gantry-worker daemon), with
// its output in a file, signalled and reaped by the test.
#ifndef GANTRY_TESTS_E2E_CHILD_PROCESS_H_
#define GANTRY_TESTS_E2E_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace gantry::testing {

class ChildProcess {
 public:
  // Starts argv[0] with argv; stdout and stderr go to `log_path`. Null when fork/exec fails.
  static std::unique_ptr<ChildProcess> Start(const std::vector<std::string>& argv,
                                             const std::string& log_path);
  // SIGTERM, then SIGKILL after 10 s, if still running.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Sends `signal` and waits up to timeout_ms for the exit; returns the exit code (128 + signal
  // when killed by one) or -1 when it is still running.
  int Signal(int signal, int timeout_ms);
  bool Running();
  std::string Log() const;

 private:
  ChildProcess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  int Wait(int timeout_ms);

  pid_t pid_;
  std::string log_path_;
  bool exited_ = false;
  int exit_code_ = -1;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_E2E_CHILD_PROCESS_H_
