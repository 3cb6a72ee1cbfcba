// ServerProcess: a real gantry-server child process for integration tests, started with --listen
// 127.0.0.1:0 and found through the "listening on HOST:PORT" line it prints.
#ifndef GANTRY_TESTS_SERVER_SERVER_PROCESS_H_
#define GANTRY_TESTS_SERVER_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace gantry::testing {

class ServerProcess {
 public:
  // Runs GANTRY_SERVER_BINARY with `args` (plus --listen 127.0.0.1:0 unless args has --listen) and
  // waits up to 60 s for its address. Returns null and sets *error (with the server's stderr) when
  // it exits or does not come up. stderr goes to `stderr_path`.
  static std::unique_ptr<ServerProcess> Start(const std::vector<std::string>& args,
                                              const std::string& stderr_path, std::string* error);
  // Terminates it (SIGTERM, then SIGKILL after 10 s) if still running.
  ~ServerProcess();

  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }

  // Sends SIGTERM and waits; returns the exit code (128 + signal when killed by one).
  int Terminate();
  // Sends SIGKILL and reaps the process.
  void Kill();
  // The server's stderr so far.
  std::string Stderr() const;

  // Runs the binary to completion (for refused starts); returns the exit code, stderr in *output.
  static int RunToExit(const std::vector<std::string>& args, std::string* output);

 private:
  ServerProcess(pid_t pid, std::string address, std::string stderr_path)
      : pid_(pid), address_(std::move(address)), stderr_path_(std::move(stderr_path)) {}
  int WaitExit(int timeout_ms);

  pid_t pid_;
  std::string address_;
  std::string stderr_path_;
  bool exited_ = false;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SERVER_SERVER_PROCESS_H_
