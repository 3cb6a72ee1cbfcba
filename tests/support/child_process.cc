#include "tests/support/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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

pid_t Spawn(const std::vector<std::string>& args, int out_fd) {
  std::vector<std::string> storage = args;
  std::vector<char*> argv;
  for (std::string& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, STDOUT_FILENO);
    dup2(out_fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& args, const std::string& log_path)
    : log_path_(log_path) {
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  pid_ = Spawn(args, fd);
  close(fd);
  if (pid_ < 0) exited_ = true;
}

ChildProcess::~ChildProcess() {
  if (Running()) {
    kill(pid_, SIGKILL);
    Wait(10000);
  }
}

bool ChildProcess::Running() {
  if (exited_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    exited_ = true;
    exit_code_ = ExitCode(status);
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

std::string ChildProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int ChildProcess::RunToExit(const std::vector<std::string>& args, std::string* output) {
  char path[] = "/tmp/gantry-child-run-XXXXXX";
  const int fd = mkstemp(path);
  ChildProcess child(args, path);
  close(fd);
  const int code = child.Wait(30000);
  *output = child.Log();
  unlink(path);
  return code;
}

}  // namespace gantry::testing
