// Small file helpers for tests: whole-file reads, existence checks, secret files.
#ifndef GANTRY_TESTS_SUPPORT_FILES_H_
#define GANTRY_TESTS_SUPPORT_FILES_H_

#include <string>

namespace gantry::testing {

// The whole file, bytes as they are; empty when it cannot be read.
std::string ReadFile(const std::string& path);

// Whether something (a file, directory or the target of a link) exists at path.
bool Exists(const std::string& path);

// Writes `content` to a file only its owner may read and write (mode 0600, replacing what is
// there atomically: base/atomic_file.h), as the programs require of a token, DSN or credential
// file (base/secret_file.h).
// Aborts the test program when it cannot.
void WriteSecretFile(const std::string& path, const std::string& content);

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SUPPORT_FILES_H_
