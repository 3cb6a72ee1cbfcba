// ParseFlags: the one way gantry's binaries parse their command line (Abseil flags, called only
// from main). Flag names may be written with dashes (--data-dir) as documented, or with
// underscores.
#ifndef GANTRY_BASE_FLAGS_H_
#define GANTRY_BASE_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gantry {

// Both forms print the version and build info (GantryVersionText) and exit 0 when argv has
// --version before any "--".
//
// Sets `usage`, parses argv into the ABSL_FLAGs linked into the binary (exits with a message on an
// unknown or malformed flag, and on --help), and returns the positional arguments without argv[0].
std::vector<std::string> ParseFlags(int argc, char** argv, const std::string& usage);

// For binaries that print their own usage and exit codes on a bad command line: parses argv into
// the same ABSL_FLAGs (--flag=value, --flag value, --bool, --nobool; "--" ends the flags) but
// returns INVALID_ARGUMENT naming the flag as --name for an unknown flag, a missing value or a
// value the flag's type rejects, and sets `*help` for --help or -h instead of printing and exiting.
// Returns the positional arguments without argv[0].
absl::StatusOr<std::vector<std::string>> ParseFlags(int argc, char** argv, bool* help);

}  // namespace gantry

#endif  // GANTRY_BASE_FLAGS_H_
