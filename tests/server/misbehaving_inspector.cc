// A stand-in for gantry-inspect that misbehaves on purpose, for the tests of gantry-server's
// sandboxed inspection: the uploaded file's first line (read from fd 3) picks what it does.
//   MODE:alloc   allocate until the address-space limit ends it (std::bad_alloc -> abort)
//   MODE:spin    burn CPU forever          MODE:sleep  block forever
//   MODE:segv    crash with SIGSEGV        MODE:flood  write output forever
//   MODE:lies    print a malformed report
//   MODE:slow:MS answer a well-formed report of a 25x25x25 electron file after MS milliseconds
//   MODE:probe:PORT  report (as a refused file) whether 127.0.0.1:PORT is reachable, which file
//                    descriptors are open and how many environment variables it got
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

int main() {
  char head[64] = {0};
  const ssize_t n = read(3, head, sizeof(head) - 1);
  const std::string mode(head, n > 0 ? static_cast<size_t>(n) : 0);
  if (mode.rfind("MODE:alloc", 0) == 0) {
    std::vector<char*> blocks;
    for (;;) {
      char* block = new char[64 << 20];
      std::memset(block, 1, 64 << 20);
      blocks.push_back(block);
    }
  }
  if (mode.rfind("MODE:spin", 0) == 0) {
    for (volatile unsigned long i = 0;; i = i + 1) {
    }
  }
  if (mode.rfind("MODE:sleep", 0) == 0) {
    for (;;) pause();
  }
  if (mode.rfind("MODE:segv", 0) == 0) raise(SIGSEGV);
  if (mode.rfind("MODE:flood", 0) == 0) {
    const std::string line(4096, 'x');
    for (;;) fwrite(line.data(), 1, line.size(), stdout);
  }
  if (mode.rfind("MODE:lies", 0) == 0) {
    std::printf("ok\nevents -5\nshape 1 1\n");
    return 0;
  }
  if (mode.rfind("MODE:slow:", 0) == 0) {
    usleep(static_cast<useconds_t>(std::atoi(mode.c_str() + 10)) * 1000);
    std::printf(
        "ok\nlayout 0\nshape 25 25 25\nevents 6\nenergy 20 80\ntheta 0 0 0\ntotal 100\n"
        "particle Ele\n");
    return 0;
  }
  if (mode.rfind("MODE:probe:", 0) == 0) {
    const int port = std::atoi(mode.c_str() + 11);
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool reachable =
        s >= 0 && connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    std::string fds;
    if (DIR* d = opendir("/proc/self/fd")) {
      const int own = dirfd(d);
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.' || std::atoi(e->d_name) == own || std::atoi(e->d_name) == s) {
          continue;
        }
        fds += std::string(fds.empty() ? "" : ",") + e->d_name;
      }
      closedir(d);
    }
    int env = 0;
    for (char** e = environ; *e != nullptr; ++e) ++env;
    std::printf("error 3\nprobe net=%s fds=%s env=%d\n", reachable ? "reachable" : "unreachable",
                fds.c_str(), env);
    return 0;
  }
  std::printf("error 3\nunknown mode\n");
  return 0;
}
