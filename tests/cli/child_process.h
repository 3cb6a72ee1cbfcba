// ChildProcess: runs real binaries for the CLI end-to-end tests: a command to completion (exit
// code, stdout, stderr) or a long-running gantry-server found through its "listening on HOST:PORT"
// line.
#ifndef GANTRY_TESTS_CLI_CHILD_PROCESS_H_
#define GANTRY_TESTS_CLI_CHILD_PROCESS_H_

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

  // SIGTERM, then SIGKILL after 10 s; reaps the child.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  const std::string& address() const { return address_; }

 private:
  ChildProcess(pid_t pid, std::string address, int stdout_fd)
      : pid_(pid), address_(std::move(address)), stdout_fd_(stdout_fd) {}
  pid_t pid_;
  std::string address_;
  int stdout_fd_;  // read end of the server's stdout pipe
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_CLI_CHILD_PROCESS_H_
