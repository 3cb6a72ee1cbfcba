#include "tests/server/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/build_paths.h"

namespace gantry::testing {
namespace {

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Forks and execs the server with stdout to `out_fd` and stderr to `err_fd`.
pid_t Spawn(std::vector<std::string> args, int out_fd, int err_fd) {
  bool has_listen = false;
  for (const std::string& a : args) has_listen = has_listen || a.rfind("--listen", 0) == 0;
  if (!has_listen) args.push_back("--listen=127.0.0.1:0");
  std::vector<char*> argv;
  std::string binary = GANTRY_SERVER_BINARY;
  argv.push_back(binary.data());
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::vector<std::string>& args,
                                                    const std::string& stderr_path,
                                                    std::string* error) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    *error = "pipe failed";
    return nullptr;
  }
  const int err_fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  const pid_t pid = Spawn(args, pipe_fds[1], err_fd);
  close(pipe_fds[1]);
  close(err_fd);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::string address;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      char buffer[256];
      const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
      if (n <= 0) break;  // the server closed stdout: it exited
      out.append(buffer, n);
      const size_t at = out.find("listening on ");
      const size_t eol = at == std::string::npos ? at : out.find('\n', at);
      if (eol != std::string::npos) {
        address = out.substr(at + 13, eol - at - 13);
        break;
      }
    }
  }
  close(pipe_fds[0]);
  std::unique_ptr<ServerProcess> server(new ServerProcess(pid, address, stderr_path));
  if (address.empty()) {
    server->Kill();
    *error = "gantry-server did not report its address; stdout: " + out +
             "\nstderr: " + ReadAll(stderr_path);
    return nullptr;
  }
  return server;
}

ServerProcess::~ServerProcess() {
  if (!exited_) Terminate();
}

int ServerProcess::WaitExit(int timeout_ms) {
  for (int waited = 0; waited <= timeout_ms; waited += 10) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      return ExitCode(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

int ServerProcess::Terminate() {
  if (exited_) return -1;
  kill(pid_, SIGTERM);
  const int code = WaitExit(10000);
  if (code != -1) return code;
  Kill();
  return 128 + SIGKILL;
}

void ServerProcess::Kill() {
  if (exited_) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  exited_ = true;
}

std::string ServerProcess::Stderr() const { return ReadAll(stderr_path_); }

int ServerProcess::RunToExit(const std::vector<std::string>& args, std::string* output) {
  char path[] = "/tmp/gantry-server-run-XXXXXX";
  const int fd = mkstemp(path);
  const int null_fd = open("/dev/null", O_WRONLY);
  const pid_t pid = Spawn(args, null_fd, fd);
  close(fd);
  close(null_fd);
  int status = 0;
  waitpid(pid, &status, 0);
  *output = ReadAll(path);
  unlink(path);
  return ExitCode(status);
}

}  // namespace gantry::testing
