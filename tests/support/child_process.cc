#include "tests/support/child_process.h"

#include "tests/support/files.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace gantry::testing {
namespace {

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// In the child after fork: apply env, then exec. Never returns.
[[noreturn]] void ExecChild(const std::vector<std::string>& argv, const EnvChanges& env) {
  for (const auto& [name, value] : env) {
    if (value.has_value()) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  dprintf(STDERR_FILENO, "exec %s failed: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

// Waits for `pid` up to `timeout_ms` (-1 = forever); returns the exit code or nullopt on timeout.
std::optional<int> WaitFor(pid_t pid, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    int status = 0;
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return ExitCode(status);
    if (done < 0) return -1;
    if (timeout_ms >= 0 && std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& log_path)
    : log_path_(log_path) {
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    ExecChild(argv, {});
  }
  close(fd);
  if (pid_ < 0) exited_ = true;
}

ChildProcess::ChildProcess(pid_t pid, std::string address, std::string log_path, int stdout_fd)
    : pid_(pid),
      log_path_(std::move(log_path)),
      address_(std::move(address)),
      stdout_fd_(stdout_fd),
      graceful_stop_(true) {}

ChildProcess::~ChildProcess() {
  if (Running()) {
    if (graceful_stop_) {
      kill(pid_, SIGTERM);
      if (Wait(10000) == -1) kill(pid_, SIGKILL);
    } else {
      kill(pid_, SIGKILL);
    }
    while (Running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

bool ChildProcess::Running() {
  if (exited_) return false;
  int status = 0;
  const pid_t done = waitpid(pid_, &status, WNOHANG);
  if (done == pid_) {
    exited_ = true;
    exit_code_ = ExitCode(status);
  } else if (done < 0) {
    exited_ = true;  // not our child any more (already reaped): nothing to wait for
  }
  return !exited_;
}

int ChildProcess::Wait(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Running()) {
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return exit_code_;
}

int ChildProcess::Signal(int signal, int timeout_ms) {
  if (Running()) kill(pid_, signal);
  return Wait(timeout_ms);
}

std::string ChildProcess::Log() const { return ReadFile(log_path_); }

int ChildProcess::RunToExit(const std::vector<std::string>& argv, std::string* output) {
  char path[] = "/tmp/gantry-child-run-XXXXXX";
  const int fd = mkstemp(path);
  ChildProcess child(argv, path);
  close(fd);
  const int code = child.Wait(30000);
  *output = child.Log();
  unlink(path);
  return code;
}

CommandResult ChildProcess::Run(const std::vector<std::string>& argv, const EnvChanges& env,
                                const std::string& scratch_dir, int timeout_seconds) {
  static std::atomic<int> counter{0};
  const int n = counter++;
  const std::string out_path = scratch_dir + "/run-" + std::to_string(n) + ".out";
  const std::string err_path = scratch_dir + "/run-" + std::to_string(n) + ".err";
  pid_t pid = fork();
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    ExecChild(argv, env);
  }
  CommandResult result;
  if (pid < 0) {
    result.err = std::string("fork failed: ") + std::strerror(errno);
    return result;
  }
  std::optional<int> code = WaitFor(pid, timeout_seconds * 1000);
  if (!code.has_value()) {
    kill(pid, SIGKILL);
    code = WaitFor(pid, -1);
    result.err = "(killed after timeout) ";
  }
  result.exit_code = *code;
  result.out = ReadFile(out_path);
  result.err += ReadFile(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return result;
}

std::unique_ptr<ChildProcess> ChildProcess::StartServer(const std::vector<std::string>& argv,
                                                        const std::string& stderr_path,
                                                        std::string* error, int timeout_seconds) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    *error = "pipe failed";
    return nullptr;
  }
  pid_t pid = fork();
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY);
    int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || err < 0) _exit(126);
    dup2(in, STDIN_FILENO);
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    ExecChild(argv, {});
  }
  close(pipe_fds[1]);
  if (pid < 0) {
    close(pipe_fds[0]);
    *error = "fork failed";
    return nullptr;
  }
  std::string output;
  const std::string marker = "listening on ";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    size_t at = output.find(marker);
    size_t end = at == std::string::npos ? at : output.find('\n', at);
    if (end != std::string::npos) {
      std::string address = output.substr(at + marker.size(), end - at - marker.size());
      // The read end stays open until the server is gone, so a later write to its stdout never
      // raises SIGPIPE.
      return std::unique_ptr<ChildProcess>(
          new ChildProcess(pid, address, stderr_path, pipe_fds[0]));
    }
    pollfd fd{pipe_fds[0], POLLIN, 0};
    if (poll(&fd, 1, 200) > 0) {
      char buffer[512];
      ssize_t got = read(pipe_fds[0], buffer, sizeof(buffer));
      if (got <= 0) break;  // the server closed stdout: it exited
      output.append(buffer, static_cast<size_t>(got));
    }
  }
  close(pipe_fds[0]);
  kill(pid, SIGKILL);
  WaitFor(pid, -1);
  *error =
      "server did not print its address; stdout: " + output + "\nstderr: " + ReadFile(stderr_path);
  return nullptr;
}

}  // namespace gantry::testing
