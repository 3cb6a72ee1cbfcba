// ChildProcess: real child processes for integration tests.
// - A long-running process (a worker daemon, a rank, a tool) with stdout and stderr appended to a log
//   file, signalled, waited for and reaped by the test: the constructor.
// - A server that prints "listening on HOST:PORT" on stdout, found through that line: StartServer.
// - A command run to completion with its exit code and output: Run (stdout and stderr apart, an
//   environment, stdin from /dev/null) and RunToExit (both streams together).
#ifndef GANTRY_TESTS_SUPPORT_CHILD_PROCESS_H_
#define GANTRY_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gantry::testing {

struct CommandResult {
  int exit_code = -1;  // 128 + signal when killed by one
  std::string out;
  std::string err;
};

// Environment changes for a child: a value sets the variable, nullopt removes it.
using EnvChanges = std::map<std::string, std::optional<std::string>>;

class ChildProcess {
 public:
  // Runs argv[0] with argv (execv); output goes to `log_path`. pid() is -1 when fork failed.
  ChildProcess(const std::vector<std::string>& argv, const std::string& log_path);
  // Still running: SIGKILL, or for a StartServer child SIGTERM then SIGKILL after 10 s; reaps it.
  virtual ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The "HOST:PORT" a StartServer child printed; empty otherwise.
  const std::string& address() const { return address_; }
  // True while the process has not exited (reaps it when it has).
  bool Running();
  // Waits up to timeout_ms; the exit code (128 + signal when killed by one), -1 on timeout.
  int Wait(int timeout_ms);
  // Sends `signal` (if still running) and waits as above.
  int Signal(int signal, int timeout_ms);
  // The log file (for a StartServer child: its stderr).
  std::string Log() const;

  // Runs argv to completion (up to 30 s); returns its exit code and its output in *output.
  static int RunToExit(const std::vector<std::string>& argv, std::string* output);

  // Runs argv[0] (a path) with `env` applied on top of this process's environment and stdin from
  // /dev/null; kills it after `timeout_seconds`. Output is collected through files in
  // `scratch_dir`.
  static CommandResult Run(const std::vector<std::string>& argv, const EnvChanges& env,
                           const std::string& scratch_dir, int timeout_seconds = 60);

  // Starts argv (a server that prints "listening on HOST:PORT" on stdout) with stderr to
  // `stderr_path`, and waits up to `timeout_seconds` for the address. Null and *error on failure.
  static std::unique_ptr<ChildProcess> StartServer(const std::vector<std::string>& argv,
                                                   const std::string& stderr_path,
                                                   std::string* error, int timeout_seconds = 60);

 private:
  ChildProcess(pid_t pid, std::string address, std::string log_path, int stdout_fd);

  pid_t pid_ = -1;
  std::string log_path_;
  bool exited_ = false;
  int exit_code_ = -1;
  std::string address_;
  int stdout_fd_ = -1;  // StartServer: the read end of the server's stdout pipe
  bool graceful_stop_ = false;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SUPPORT_CHILD_PROCESS_H_
