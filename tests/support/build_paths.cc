#include "tests/support/build_paths.h"

namespace gantry::testing {

// Defined in the generated build_paths_generated.cc (tests/support/CMakeLists.txt).
extern const char kGantryBuildDir[];
extern const char kGantrySourceDir[];

namespace {
std::string Join(const char* dir, std::string_view relative) {
  std::string path = dir;
  if (!relative.empty()) {
    path += '/';
    path.append(relative);
  }
  return path;
}
}  // namespace

std::string BuildPath(std::string_view relative) { return Join(kGantryBuildDir, relative); }
std::string SourcePath(std::string_view relative) { return Join(kGantrySourceDir, relative); }

}  // namespace gantry::testing
