// ReadSecretFile: reads a secret a flag names by file (a token, a database DSN), as mounted
// container and Kubernetes secrets provide them, keeping it out of the process list;
// LoadOrCreateKeyFile: a server key kept in such a file, made on first use.
#ifndef GANTRY_SERVER_SECRET_FILE_H_
#define GANTRY_SERVER_SECRET_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::server {

// The largest secret file read (a DSN or a token is far smaller; anything bigger is a wrong path).
inline constexpr size_t kMaxSecretFileBytes = 64 * 1024;

// The content of the file at `path` without surrounding whitespace (a trailing newline is usual).
// Errors name `flag` and say what the file must hold (`what`, e.g. "the libpq DSN"):
// NOT_FOUND "cannot read FLAG PATH: ..." for a missing, unreadable or directory path;
// INVALID_ARGUMENT when it is larger than kMaxSecretFileBytes, empty, or shorter than
// `min_chars` characters.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view flag,
                                           absl::string_view what, size_t min_chars = 1);

// The 32-byte key (as 64 lower-case hex characters) held in the file at `path`, which the server
// creates when it is missing: mode 0600, 32 random bytes written as hex, published atomically
// (link(2) of a finished temporary file), so servers starting at once on a shared directory agree
// on one key. Missing parent directories are created with mode 0700. FAILED_PRECONDITION, naming
// `flag` and what to change, when the file is readable or writable by group or others, is not a
// regular file, or does not hold exactly 64 hex characters (surrounding whitespace aside).
absl::StatusOr<std::string> LoadOrCreateKeyFile(const std::string& path, absl::string_view flag);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_SECRET_FILE_H_
