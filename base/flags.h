// ParseFlags: the one way gantry's binaries parse their command line (Abseil flags, called only
// from main). Flag names may be written with dashes (--data-dir) as documented, or with
// underscores.
#ifndef GANTRY_BASE_FLAGS_H_
#define GANTRY_BASE_FLAGS_H_

#include <string>
#include <vector>

namespace gantry {

// Sets `usage`, parses argv into the ABSL_FLAGs linked into the binary (exits with a message on an
// unknown or malformed flag, and on --help), and returns the positional arguments without argv[0].
std::vector<std::string> ParseFlags(int argc, char** argv, const std::string& usage);

}  // namespace gantry

#endif  // GANTRY_BASE_FLAGS_H_
