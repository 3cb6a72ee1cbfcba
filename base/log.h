// Log: gantry's process log: levelled, timestamped lines on stderr, as text or as JSON lines,
// written through glog (a sink formats them; glog's own files and stderr output are off).
//
//   GANTRY_LOG(INFO) << "listening on " << address;
//   GANTRY_LOG(ERROR).Field("request_id", id) << "Generate failed";
//
// Text lines read `2026-01-02T03:04:05.678901Z I gantry-server 1234 main.cc:42] message k=v`;
// JSON lines are one object per line with ts, level, program, pid, file, line, msg and the fields.
// A line is always one line: in text lines the message's control characters (newlines too) are
// escaped (base/safe_text.h) and a field value with spaces or control characters is a JSON string.
// Put request-provided text in a message through BoundedField (base/safe_text.h).
// Logs are not command output: CLIs keep printing their results and usage errors themselves.
#ifndef GANTRY_BASE_LOG_H_
#define GANTRY_BASE_LOG_H_

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
enum class LogFormat { kText, kJson };

// How a program logs; built in main (base/log_flags.h) and passed to InitLogging.
struct LogOptions {
  std::string program;  // shown in every line; empty: the executable's name
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
};

// "debug", "info", "warning", "error" (INVALID_ARGUMENT naming the choices otherwise).
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text);
// "text" or "json".
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text);
absl::string_view LogLevelName(LogLevel level);

// Installs the options (thread-safe; may be called again, the last call wins). Lines logged
// before the first call use the defaults with the executable's name.
void InitLogging(const LogOptions& options);

// Whether a line at `level` is written under the current options (cheap; thread-safe).
bool LogEnabled(LogLevel level);

// Tests only: sends lines to `out` instead of stderr (nullptr restores stderr). Not thread-safe
// against concurrent logging.
void SetLogOutputForTesting(std::string* out);

// One log line, written when it is destroyed (at the end of the full expression). Thread-safe:
// lines from concurrent threads never interleave.
class LogLine {
 public:
  LogLine(LogLevel level, const char* file, int line) : level_(level), file_(file), line_(line) {}
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  ~LogLine();

  // A structured field: `key=value` after the text message, a JSON member in JSON lines.
  LogLine& Field(std::string key, std::string value) {
    fields_.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  template <typename T>
  LogLine& operator<<(const T& value) {
    message_ << value;
    return *this;
  }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream message_;
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace gantry

namespace gantry::log_internal {
// The spellings GANTRY_LOG takes (as in glog: INFO, not Info).
inline constexpr LogLevel kDEBUG = LogLevel::kDebug;
inline constexpr LogLevel kINFO = LogLevel::kInfo;
inline constexpr LogLevel kWARNING = LogLevel::kWarning;
inline constexpr LogLevel kERROR = LogLevel::kError;

// Turns a finished LogLine expression into void, so GANTRY_LOG can be one conditional expression
// (safe inside an unbraced if/else). `&` binds looser than `<<`, so the whole chain is written first.
struct Voidify {
  void operator&(const LogLine&) const {}
};
}  // namespace gantry::log_internal

// GANTRY_LOG(DEBUG|INFO|WARNING|ERROR) << ...; the arguments are not evaluated when the level is
// off.
#define GANTRY_LOG(severity)                                               \
  !::gantry::LogEnabled(::gantry::log_internal::k##severity)               \
      ? (void)0                                                            \
      : ::gantry::log_internal::Voidify() &                                \
            ::gantry::LogLine(::gantry::log_internal::k##severity, __FILE__, __LINE__)

#endif  // GANTRY_BASE_LOG_H_
