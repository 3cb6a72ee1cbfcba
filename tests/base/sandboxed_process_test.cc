// Tests of base/sandboxed_process: the limits are really applied in the child (read back by
// /bin/sh's ulimit), the input arrives as fd 3 and nothing else leaks in, the network is cut,
// timeouts, output floods, crashes and memory bombs end the child only, and a missing binary is an
// error.
#include "base/sandboxed_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>

namespace gantry {
namespace {

SandboxRequest Shell(const std::string& script) {
  SandboxRequest r;
  r.binary = "/bin/sh";
  r.args = {"-c", script};
  r.timeout = absl::Seconds(10);
  return r;
}

SandboxResult RunChild(const SandboxRequest& r) {
  absl::StatusOr<SandboxResult> result = SandboxedProcess::Run(r);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SandboxResult{};
}

TEST(SandboxedProcessTest, LimitsApplyInTheChild) {
  SandboxRequest r = Shell("ulimit -v; ulimit -c; ulimit -n; ulimit -t; ulimit -f");
  r.limits.address_space_bytes = int64_t{512} << 20;
  r.limits.cpu_seconds = 7;
  r.limits.open_files = 20;
  const SandboxResult result = RunChild(r);
  EXPECT_TRUE(result.exited);
  EXPECT_EQ(result.exit_code, 0);
  // ulimit -f counts 512-byte blocks: 1 byte rounds down to 0.
  EXPECT_EQ(result.output, "524288\n0\n20\n7\n0\n");
}

TEST(SandboxedProcessTest, TheInputIsFd3AndNoOtherDescriptorOrVariableLeaksIn) {
  char path[] = "/tmp/sandboxed-input-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "hello", 5), 5);
  lseek(fd, 0, SEEK_SET);
  // Not close-on-exec, and high: must still not reach the child.
  const int leaked = fcntl(open("/dev/null", O_RDONLY), F_DUPFD, 100);
  ASSERT_GE(leaked, 100);
  setenv("GANTRY_SECRET_FOR_TEST", "x", 1);
  SandboxRequest r = Shell("cat <&3; echo; ls /proc/self/fd | sort -n | tr '\\n' ' '; echo; env");
  r.input_fd = fd;
  r.environment = {"GANTRY_GIVEN=yes"};
  const SandboxResult result = RunChild(r);
  close(fd);
  close(leaked);
  unlink(path);
  EXPECT_EQ(result.exit_code, 0);
  // 0-2, the input as 3 and ls's own directory descriptor (4); nothing else.
  EXPECT_EQ(result.output.substr(0, 6), "hello\n") << result.output;
  EXPECT_NE(result.output.find("\n0 1 2 3 4 \n"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("GANTRY_SECRET"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("\nGANTRY_GIVEN=yes\n"), std::string::npos) << result.output;
}

TEST(SandboxedProcessTest, TheChildHasNoNetwork) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t len = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  // bash's /dev/tcp is not in dash; python3 is on every gantry machine (Debian's).
  SandboxRequest r;
  r.binary = "/usr/bin/python3";
  r.args = {"-c", "import socket,sys\ntry:\n socket.create_connection(('127.0.0.1'," +
                      std::to_string(port) +
                      "),2)\n print('reachable')\nexcept OSError:\n"
                      " print('unreachable')"};
  r.timeout = absl::Seconds(10);
  const SandboxResult result = RunChild(r);
  close(listener);
  ASSERT_TRUE(result.network_isolated) << "the kernel refused unshare(CLONE_NEWNET)";
  EXPECT_EQ(result.output, "unreachable\n");
  r.limits.isolate_network = false;
  const SandboxResult open_net = RunChild(r);
  EXPECT_FALSE(open_net.network_isolated);
}

TEST(SandboxedProcessTest, TimeoutsFloodsCrashesAndMemoryBombsEndTheChildOnly) {
  SandboxRequest sleep = Shell("exec sleep 30");
  sleep.timeout = absl::Milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  SandboxResult result = RunChild(sleep);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.signal, SIGKILL);

  SandboxRequest flood = Shell("exec yes");
  flood.max_output_bytes = 1000;
  result = RunChild(flood);
  EXPECT_TRUE(result.output_overflow);
  EXPECT_EQ(result.output.size(), 1000u);
  EXPECT_FALSE(result.exited);

  result = RunChild(Shell("kill -SEGV $$"));
  EXPECT_EQ(result.signal, SIGSEGV);
  EXPECT_NE(SandboxedProcess::Describe(result).find("crashed"), std::string::npos);

  SandboxRequest spin;
  spin.binary = "/usr/bin/python3";
  spin.args = {"-c", "while True: pass"};
  spin.limits.cpu_seconds = 1;
  result = RunChild(spin);
  EXPECT_EQ(result.signal, SIGXCPU);
  EXPECT_FALSE(result.timed_out);

  SandboxRequest bomb;
  bomb.binary = "/usr/bin/python3";
  bomb.args = {"-c", "x = bytearray(1 << 31)"};
  bomb.limits.address_space_bytes = int64_t{256} << 20;
  result = RunChild(bomb);
  EXPECT_TRUE(result.exited);
  EXPECT_NE(result.exit_code, 0) << "MemoryError, not 2 GiB";
}

TEST(SandboxedProcessTest, AMissingBinaryIsAnError) {
  SandboxRequest r;
  r.binary = "/nonexistent/helper";
  absl::StatusOr<SandboxResult> result = SandboxedProcess::Run(r);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal) << result.status();
}

}  // namespace
}  // namespace gantry
