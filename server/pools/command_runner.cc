#include "server/pools/command_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

extern char** environ;

namespace gantry::server {
namespace {

// An unlinked temporary file, read-write; -1 on failure.
int AnonymousFile() {
  char path[] = "/tmp/gantry-command-XXXXXX";
  const int fd = mkstemp(path);
  if (fd >= 0) unlink(path);
  return fd;
}

std::string Tail(int fd, off_t max_bytes) {
  const off_t size = lseek(fd, 0, SEEK_END);
  if (size <= 0) return "";
  const off_t from = size > max_bytes ? size - max_bytes : 0;
  std::string out(static_cast<size_t>(size - from), '\0');
  const ssize_t n = pread(fd, out.data(), out.size(), from);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

}  // namespace

std::string CommandOutcome::Describe() const {
  std::string what;
  if (timed_out) {
    what = "timed out (killed)";
  } else if (exited) {
    what = absl::StrCat("exited with code ", exit_code);
  } else {
    what = absl::StrCat("killed by signal ", signal, " (", strsignal(signal), ")");
  }
  // The last non-empty output line says most (scripts print their error last).
  std::string last;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) last = std::string(line);
  }
  if (last.size() > 300) last = last.substr(0, 300) + "...";
  return last.empty() ? what : absl::StrCat(what, ": ", last);
}

absl::StatusOr<CommandOutcome> CommandRunner::Run(const CommandRequest& request) {
  if (request.argv.empty() || request.argv[0].empty()) {
    return absl::InvalidArgumentError("no command to run");
  }
  // Everything the child needs is built before fork (only async-signal-safe calls after it).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view entry(*e);
    const absl::string_view key = entry.substr(0, entry.find('='));
    if (request.env.count(std::string(key)) == 0) env_strings.emplace_back(entry);
  }
  for (const auto& [key, value] : request.env) env_strings.push_back(absl::StrCat(key, "=", value));
  std::vector<char*> envp, argv;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = request.argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  const int out_fd = AnonymousFile();
  if (out_fd < 0) return absl::InternalError(absl::StrCat("temporary file: ", strerror(errno)));
  int in_fd = -1;
  if (!request.stdin_data.empty()) {
    in_fd = AnonymousFile();
    if (in_fd < 0 || write(in_fd, request.stdin_data.data(), request.stdin_data.size()) !=
                         static_cast<ssize_t>(request.stdin_data.size())) {
      close(out_fd);
      if (in_fd >= 0) close(in_fd);
      return absl::InternalError("cannot write the command's stdin");
    }
    lseek(in_fd, 0, SEEK_SET);
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(out_fd);
    if (in_fd >= 0) close(in_fd);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    const int stdin_fd = in_fd >= 0 ? in_fd : open("/dev/null", O_RDONLY);
    dup2(stdin_fd, 0);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    const int max_fd = static_cast<int>(sysconf(_SC_OPEN_MAX));
    for (int fd = 3; fd < max_fd && fd < 65536; ++fd) close(fd);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    environ = envp.data();
    execvp(argv[0], argv.data());
    const char msg[] = "cannot execute the command\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(127);
  }
  setpgid(pid, pid);  // also from here: no race with the kill below
  if (in_fd >= 0) close(in_fd);
  CommandOutcome outcome;
  const absl::Time deadline = absl::Now() + request.timeout;
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) break;
    if (absl::Now() >= deadline || (request.cancelled != nullptr && request.cancelled->load())) {
      outcome.timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!outcome.timed_out) {
    if (WIFEXITED(status)) {
      outcome.exited = true;
      outcome.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      outcome.signal = WTERMSIG(status);
    }
  } else {
    outcome.signal = SIGKILL;
  }
  outcome.output = Tail(out_fd, 4096);
  close(out_fd);
  return outcome;
}

}  // namespace gantry::server
