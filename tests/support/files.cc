#include "tests/support/files.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/atomic_file.h"

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
  if (absl::Status written = WriteFileAtomically(path, {content}, ExistingFile::kReplace, 0600);
      !written.ok()) {
    std::fprintf(stderr, "WriteSecretFile: %s\n", std::string(written.message()).c_str());
    std::abort();
  }
}

}  // namespace gantry::testing
