// LoadOrCreateKeyFile: a server key kept in a secret file (base/secret_file.h), made on first use.
#ifndef GANTRY_SERVER_PLATFORM_SECRET_FILE_H_
#define GANTRY_SERVER_PLATFORM_SECRET_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::server {

// The 32-byte key (as 64 lower-case hex characters) held in the file at `path`, which the server
// creates when it is missing: mode 0600, 32 random bytes written as hex, published atomically
// (link(2) of a finished temporary file), so servers starting at once on a shared directory agree
// on one key. Missing parent directories are created with mode 0700. FAILED_PRECONDITION, naming
// `flag` and what to change, when the file is not private (CheckSecretFileMode), is not a regular
// file, or does not hold exactly 64 hex characters (surrounding whitespace aside).
absl::StatusOr<std::string> LoadOrCreateKeyFile(const std::string& path, absl::string_view flag);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_SECRET_FILE_H_
