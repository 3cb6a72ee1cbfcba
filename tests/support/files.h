// Small file helpers for tests: whole-file reads and existence checks.
#ifndef GANTRY_TESTS_SUPPORT_FILES_H_
#define GANTRY_TESTS_SUPPORT_FILES_H_

#include <string>

namespace gantry::testing {

// The whole file, bytes as they are; empty when it cannot be read.
std::string ReadFile(const std::string& path);

// Whether something (a file, directory or the target of a link) exists at path.
bool Exists(const std::string& path);

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SUPPORT_FILES_H_
