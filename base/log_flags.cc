#include "base/log_flags.h"

#include "absl/flags/flag.h"
#include "base/status_macros.h"

ABSL_FLAG(std::string, log_format, "text",
          "log lines on stderr as text or json (one JSON object per line)");
ABSL_FLAG(std::string, log_level, "info", "lowest level logged: debug, info, warning or error");

namespace gantry {

absl::StatusOr<LogOptions> LogOptionsFromFlags(const std::string& program) {
  LogOptions options;
  options.program = program;
  ASSIGN_OR_RETURN(options.format, ParseLogFormat(absl::GetFlag(FLAGS_log_format)));
  ASSIGN_OR_RETURN(options.level, ParseLogLevel(absl::GetFlag(FLAGS_log_level)));
  return options;
}

std::vector<std::string> LogFlagsAsArguments() {
  return {"--log-format=" + absl::GetFlag(FLAGS_log_format),
          "--log-level=" + absl::GetFlag(FLAGS_log_level)};
}

}  // namespace gantry
