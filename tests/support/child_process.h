// ChildProcess: a real child process for integration tests (a worker daemon, a rank), its stdout
// and stderr appended to a log file, signalled, waited for and reaped by the test.
#ifndef GANTRY_TESTS_SUPPORT_CHILD_PROCESS_H_
#define GANTRY_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace gantry::testing {

class ChildProcess {
 public:
  // Runs argv[0] with argv (execv); output goes to `log_path`. pid() is -1 when fork failed.
  ChildProcess(const std::vector<std::string>& argv, const std::string& log_path);
  // SIGKILLs it if still running, and reaps it.
  virtual ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // True while the process has not exited (reaps it when it has).
  bool Running();
  // Waits up to timeout_ms; the exit code (128 + signal when killed by one), -1 on timeout.
  int Wait(int timeout_ms);
  // Sends `signal` (if still running) and waits as above.
  int Signal(int signal, int timeout_ms);
  std::string Log() const;

  // Runs argv to completion (up to 30 s); returns its exit code and its output in *output.
  static int RunToExit(const std::vector<std::string>& argv, std::string* output);

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  bool exited_ = false;
  int exit_code_ = -1;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SUPPORT_CHILD_PROCESS_H_
