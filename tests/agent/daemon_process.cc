#include "tests/agent/daemon_process.h"

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
  std::vector<std::string> storage = {AGENT_TEST_DAEMON_BINARY};
  storage.insert(storage.end(), args.begin(), args.end());
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

DaemonProcess::DaemonProcess(const std::vector<std::string>& args, const std::string& log_path)
    : log_path_(log_path) {
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  pid_ = Spawn(args, fd);
  close(fd);
}

DaemonProcess::~DaemonProcess() {
  if (Running()) {
    kill(pid_, SIGKILL);
    Wait(10000);
  }
}

bool DaemonProcess::Running() {
  if (exited_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    exited_ = true;
    exit_code_ = ExitCode(status);
  }
  return !exited_;
}

int DaemonProcess::Wait(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Running()) {
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return exit_code_;
}

int DaemonProcess::Signal(int signal, int timeout_ms) {
  if (Running()) kill(pid_, signal);
  return Wait(timeout_ms);
}

std::string DaemonProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int DaemonProcess::RunToExit(const std::vector<std::string>& args, std::string* output) {
  char path[] = "/tmp/gantry-agent-run-XXXXXX";
  const int fd = mkstemp(path);
  DaemonProcess daemon(args, path);
  close(fd);
  const int code = daemon.Wait(30000);
  *output = daemon.Log();
  unlink(path);
  return code;
}

}  // namespace gantry::testing
