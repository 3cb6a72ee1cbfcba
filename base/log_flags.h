// LogFlags: the logging flags every gantry daemon takes (--log-format, --log-level), read into
// LogOptions in main after ParseFlags.
#ifndef GANTRY_BASE_LOG_FLAGS_H_
#define GANTRY_BASE_LOG_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/log.h"

namespace gantry {

// The parsed --log-format and --log-level for `program`; INVALID_ARGUMENT naming the flag and
// its choices for a bad value.
absl::StatusOr<LogOptions> LogOptionsFromFlags(const std::string& program);

// The same flags as command-line arguments, to pass to child processes (a daemon's ranks).
std::vector<std::string> LogFlagsAsArguments();

}  // namespace gantry

#endif  // GANTRY_BASE_LOG_FLAGS_H_
