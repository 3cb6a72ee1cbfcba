// Paths into this build and its source tree, for tests that start gantry's programs or read its files.
//
// The two directories are compiled into one generated file of gantry_test_support
// (build_paths_generated.cc in the build directory), not into each test: a test's own object is then
// the same in any checkout, and a fresh clone's build (CI clones afresh) reuses it from the compiler
// cache. The per-test path macros (GANTRY_WORKER_BINARY and the like, from gantry_test_paths() in
// tests/CMakeLists.txt) expand to calls of these functions.
#ifndef GANTRY_TESTS_SUPPORT_BUILD_PATHS_H_
#define GANTRY_TESTS_SUPPORT_BUILD_PATHS_H_

#include <string>
#include <string_view>

namespace gantry::testing {

// The build directory + "/" + relative (the build directory itself when relative is empty).
std::string BuildPath(std::string_view relative);
// The source directory + "/" + relative (the source directory itself when relative is empty).
std::string SourcePath(std::string_view relative);

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SUPPORT_BUILD_PATHS_H_
