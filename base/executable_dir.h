// ExecutableDir: the folder of the running binary (/proc/self/exe), where gantry's programs look
// for the helpers and files installed next to them.
#ifndef GANTRY_BASE_EXECUTABLE_DIR_H_
#define GANTRY_BASE_EXECUTABLE_DIR_H_

#include <unistd.h>

#include <string>

namespace gantry {

// "/path/to/bin" (no trailing slash), or "" when /proc/self/exe cannot be read.
inline std::string ExecutableDir() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  std::string dir(self, static_cast<size_t>(n));
  dir.resize(dir.find_last_of('/'));
  return dir;
}

}  // namespace gantry

#endif  // GANTRY_BASE_EXECUTABLE_DIR_H_
