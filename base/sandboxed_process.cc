// Everything the child does between fork and execve is an async-signal-safe system call on memory
// prepared before the fork (the caller is multithreaded: gRPC, HDF5, LibTorch threads).
#include "base/sandboxed_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"

namespace gantry {
namespace {

constexpr int kInputFd = 3;
constexpr int kStatusFd = 4;  // close-on-exec: EOF tells the parent execve succeeded

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The child's side: never returns.
[[noreturn]] void Child(const SandboxRequest& r, char* const argv[], char* const envp[],
                        int devnull, int out_write, int status_write, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  ::setpgid(0, 0);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) {
    if (s != SIGKILL && s != SIGSTOP) ::sigaction(s, &dfl, nullptr);
  }
  char isolated = 'n';
  if (r.limits.isolate_network) {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0 || ::unshare(CLONE_NEWNET) == 0) {
      isolated = 'N';
    }
  }
  // Fixed descriptors: 0 /dev/null, 1 the output pipe, 2 /dev/null, 3 the input, 4 the status
  // pipe; moved above 4 first so no dup2 overwrites a source still needed.
  int input = r.input_fd >= 0 ? ::fcntl(r.input_fd, F_DUPFD, 16) : -1;
  const int out = ::fcntl(out_write, F_DUPFD, 16);
  const int status = ::fcntl(status_write, F_DUPFD, 16);
  const int null = ::fcntl(devnull, F_DUPFD, 16);
  if (out < 0 || status < 0 || null < 0 || (r.input_fd >= 0 && input < 0)) ::_exit(127);
  ::dup2(null, 0);
  ::dup2(out, 1);
  ::dup2(null, 2);
  if (input >= 0) {
    ::dup2(input, kInputFd);
  } else {
    ::dup2(null, kInputFd);
  }
  ::dup2(status, kStatusFd);
  ::fcntl(kStatusFd, F_SETFD, FD_CLOEXEC);
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, kStatusFd + 1, ~0U, 0) != 0)
#endif
  {
    struct rlimit files {};
    ::getrlimit(RLIMIT_NOFILE, &files);
    const int top = files.rlim_cur == RLIM_INFINITY || files.rlim_cur > 65536
                        ? 65536
                        : static_cast<int>(files.rlim_cur);
    for (int fd = kStatusFd + 1; fd < top; ++fd) ::close(fd);
  }
  auto set = [](int resource, rlim_t value) {
    struct rlimit l {
      value, value
    };
    ::setrlimit(resource, &l);
  };
  set(RLIMIT_CORE, 0);
  if (r.limits.address_space_bytes > 0) set(RLIMIT_AS, r.limits.address_space_bytes);
  if (r.limits.open_files > 0) set(RLIMIT_NOFILE, r.limits.open_files);
  if (r.limits.file_size_bytes > 0) set(RLIMIT_FSIZE, r.limits.file_size_bytes);
  if (r.limits.cpu_seconds > 0) {
    struct rlimit cpu {
      static_cast<rlim_t>(r.limits.cpu_seconds), static_cast<rlim_t>(r.limits.cpu_seconds + 1)
    };
    ::setrlimit(RLIMIT_CPU, &cpu);
  }
  ssize_t ignored = ::write(kStatusFd, &isolated, 1);
  ::execve(argv[0], argv, envp);
  const int error = errno;
  ignored = ::write(kStatusFd, &error, sizeof(error));
  (void)ignored;
  ::_exit(127);
}

void KillGroup(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
}

// The status pipe: one byte (network isolated or not), then EOF at execve, or an errno. Returns
// that errno (0 when the child reached execve).
int ReadExecStatus(int fd, bool* network_isolated) {
  char buffer[8];
  size_t status_bytes = 0;
  int exec_errno = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer + status_bytes, sizeof(buffer) - status_bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    status_bytes += static_cast<size_t>(n);
    if (status_bytes == sizeof(buffer)) break;
  }
  *network_isolated = status_bytes >= 1 && buffer[0] == 'N';
  if (status_bytes >= 1 + sizeof(int)) std::memcpy(&exec_errno, buffer + 1, sizeof(int));
  return exec_errno;
}

// The child's stdout into result->output, bounded by max_bytes, until EOF, the deadline or too
// much output. Returns whether the child must be killed now (timed out or overflowed).
bool ReadBoundedOutput(int fd, absl::Time deadline, size_t max_bytes, SandboxResult* result) {
  std::string& output = result->output;
  char chunk[16 << 10];
  for (;;) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      result->timed_out = true;
      return true;
    }
    struct pollfd p {
      fd, POLLIN, 0
    };
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (ready < 0 && errno != EINTR) return false;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;  // EOF: the child closed stdout (usually: it exited)
    if (output.size() + static_cast<size_t>(n) > max_bytes) {
      output.append(chunk, max_bytes - output.size());
      result->output_overflow = true;
      return true;
    }
    output.append(chunk, static_cast<size_t>(n));
  }
}

// Reaps the child, killing its group when it outlives the deadline (unless `killed` already),
// then kills anything it left in its group and records how it ended.
absl::Status Reap(pid_t pid, absl::Time deadline, bool killed, SandboxResult* result) {
  int wstatus = 0;
  for (int sleep_us = 200;;) {
    const pid_t done = ::waitpid(pid, &wstatus, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("waitpid of a sandboxed child: ", strerror(errno)));
    }
    if (absl::Now() >= deadline && !killed) {
      result->timed_out = killed = true;
      KillGroup(pid);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, 20000);
  }
  ::kill(-pid, SIGKILL);  // anything the child left in its group
  if (WIFEXITED(wstatus)) {
    result->exited = true;
    result->exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    result->signal = WTERMSIG(wstatus);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SandboxResult> SandboxedProcess::RunOnFile(const std::string& path,
                                                          SandboxRequest request) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError("the input file cannot be opened");
  request.input_fd = fd;
  absl::StatusOr<SandboxResult> run = Run(request);
  ::close(fd);
  return run;
}

absl::StatusOr<SandboxResult> SandboxedProcess::Run(const SandboxRequest& request) {
  // Everything the child needs, allocated before the fork.
  std::vector<std::string> strings;
  strings.reserve(request.args.size() + 1);
  strings.push_back(request.binary);
  strings.insert(strings.end(), request.args.begin(), request.args.end());
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> environment = request.environment;
  std::vector<char*> envp;
  for (std::string& s : environment) envp.push_back(s.data());
  envp.push_back(nullptr);

  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  int out[2] = {-1, -1}, status[2] = {-1, -1};
  if (devnull < 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(status, O_CLOEXEC) != 0) {
    const std::string error = strerror(errno);
    CloseFd(devnull);
    for (int* fd : {&out[0], &out[1], &status[0], &status[1]}) CloseFd(*fd);
    return absl::InternalError(absl::StrCat("cannot create pipes for a sandboxed child: ", error));
  }
  const pid_t parent = ::getpid();
  const absl::Time deadline = absl::Now() + request.timeout;
  const pid_t pid = ::fork();
  if (pid == 0) Child(request, argv.data(), envp.data(), devnull, out[1], status[1], parent);
  const int fork_errno = errno;
  CloseFd(devnull);
  CloseFd(out[1]);
  CloseFd(status[1]);
  if (pid < 0) {
    CloseFd(out[0]);
    CloseFd(status[0]);
    return absl::InternalError(
        absl::StrCat("cannot fork a sandboxed child: ", strerror(fork_errno)));
  }
  ::setpgid(pid, pid);  // also from here, so a kill of the group cannot race the child's setpgid

  SandboxResult result;
  const int exec_errno = ReadExecStatus(status[0], &result.network_isolated);
  CloseFd(status[0]);

  const bool kill_now =
      exec_errno == 0 && ReadBoundedOutput(out[0], deadline, request.max_output_bytes, &result);
  CloseFd(out[0]);
  if (kill_now) KillGroup(pid);

  RETURN_IF_ERROR(Reap(pid, deadline, kill_now, &result));
  if (exec_errno != 0) {
    return absl::InternalError(
        absl::StrCat("cannot execute ", request.binary, ": ", strerror(exec_errno)));
  }
  return result;
}

std::string SandboxedProcess::Describe(const SandboxResult& r) {
  if (r.timed_out) return "it ran past its time limit and was stopped";
  if (r.output_overflow) return "it wrote more output than allowed and was stopped";
  if (r.exited) return absl::StrCat("it exited with code ", r.exit_code);
  if (r.signal == SIGXCPU) return "it ran out of CPU time";
  if (r.signal == SIGSEGV || r.signal == SIGBUS) {
    return absl::StrCat("it crashed (", strsignal(r.signal), ")");
  }
  if (r.signal == SIGABRT) return "it aborted (often: out of memory)";
  if (r.signal == SIGKILL) return "it was killed (a resource limit)";
  return absl::StrCat("it was killed by signal ", r.signal, " (", strsignal(r.signal), ")");
}

}  // namespace gantry
