#include "tests/support/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace gantry::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

void WriteSecretFile(const std::string& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const bool written = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                       ::write(fd, content.data(), content.size()) ==
                           static_cast<ssize_t>(content.size());
  if (fd >= 0) ::close(fd);
  if (!written) {
    std::fprintf(stderr, "WriteSecretFile: cannot write %s\n", path.c_str());
    std::abort();
  }
}

}  // namespace gantry::testing
