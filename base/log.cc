// The sink is the only writer: glog's own files and stderr output are switched off at the first
// use, so lines from LibTorch's glog calls (c10 logs through glog) come out in the same format.
#include "base/log.h"

#include <errno.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <string>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/json_string.h"
#include "base/safe_text.h"
#include "glog/logging.h"

namespace gantry {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};

absl::Mutex g_mu;
std::string* g_program ABSL_GUARDED_BY(g_mu) = nullptr;  // leaked: lines may come at exit
std::string* g_test_out ABSL_GUARDED_BY(g_mu) = nullptr;

// The line being written by this thread through glog (glog calls the sink on the logging thread).
struct Pending {
  LogLevel level;
  const std::vector<std::pair<std::string, std::string>>* fields;
};
thread_local const Pending* tl_pending = nullptr;

// A text field value: bare when it is one plain word, quoted otherwise.
void AppendTextValue(std::string* out, absl::string_view value) {
  bool plain = !value.empty();
  for (const char c : value) {
    if (c == ' ' || c == '"' || c == '=' || static_cast<unsigned char>(c) < 0x20) plain = false;
  }
  if (plain) {
    out->append(value.data(), value.size());
  } else {
    AppendJsonString(out, value);
  }
}

LogLevel LevelOfSeverity(google::LogSeverity severity) {
  if (severity >= google::GLOG_ERROR) return LogLevel::kError;
  if (severity == google::GLOG_WARNING) return LogLevel::kWarning;
  return LogLevel::kInfo;
}

class FormattingSink : public google::LogSink {
 public:
  void send(google::LogSeverity severity, const char* /*full_filename*/, const char* base_filename,
            int line, const google::LogMessageTime& time, const char* message,
            size_t message_len) override {
    const Pending* pending = tl_pending;
    const LogLevel level = pending != nullptr ? pending->level : LevelOfSeverity(severity);
    if (!LogEnabled(level)) return;
    std::tm utc;
    const std::time_t seconds = time.timestamp();
    gmtime_r(&seconds, &utc);
    char stamp[40];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", utc.tm_year + 1900,
                  utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                  static_cast<int>(time.usec()));
    const absl::string_view text(message, message_len);
    absl::MutexLock lock(&g_mu);
    const std::string program = g_program != nullptr ? *g_program : program_invocation_short_name;
    std::string out;
    if (static_cast<LogFormat>(g_format.load()) == LogFormat::kJson) {
      absl::StrAppend(&out, "{\"ts\":\"", stamp, "\",\"level\":\"", LogLevelName(level),
                      "\",\"program\":");
      AppendJsonString(&out, program);
      absl::StrAppend(&out, ",\"pid\":", getpid(), ",\"file\":");
      AppendJsonString(&out, base_filename);
      absl::StrAppend(&out, ",\"line\":", line, ",\"msg\":");
      AppendJsonString(&out, text);
      if (pending != nullptr) {
        for (const auto& [key, value] : *pending->fields) {
          out.push_back(',');
          AppendJsonString(&out, key);
          out.push_back(':');
          AppendJsonString(&out, value);
        }
      }
      out.append("}\n");
    } else {
      const char letter = absl::ascii_toupper(LogLevelName(level)[0]);
      absl::StrAppend(&out, stamp, " ", std::string(1, letter), " ", program, " ", getpid(), " ",
                      base_filename, ":", line, "] ", EscapeControlText(text));
      if (pending != nullptr) {
        for (const auto& [key, value] : *pending->fields) {
          absl::StrAppend(&out, " ", key, "=");
          AppendTextValue(&out, value);
        }
      }
      out.push_back('\n');
    }
    if (g_test_out != nullptr) {
      g_test_out->append(out);
      return;
    }
    // One write per line, so lines of processes sharing a log file stay whole.
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::write(STDERR_FILENO, out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
};

void EnsureGlog() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    if (!google::IsGoogleLoggingInitialized()) {
      google::InitGoogleLogging(program_invocation_short_name);
    }
    FLAGS_logtostderr = false;
    FLAGS_alsologtostderr = false;
    FLAGS_stderrthreshold = google::NUM_SEVERITIES;  // the sink writes stderr, glog does not
    FLAGS_minloglevel = google::GLOG_INFO;
    for (int severity = 0; severity < google::NUM_SEVERITIES; ++severity) {
      google::SetLogDestination(severity, "");  // no log files
    }
    google::AddLogSink(new FormattingSink());  // leaked: used until exit
  });
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("--log-level=", text, ": use debug, info, warning or error"));
}

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "text") return LogFormat::kText;
  if (lower == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat("--log-format=", text, ": use text or json"));
}

absl::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

void InitLogging(const LogOptions& options) {
  EnsureGlog();
  {
    absl::MutexLock lock(&g_mu);
    if (!options.program.empty()) {
      if (g_program == nullptr) g_program = new std::string();
      *g_program = options.program;
    }
  }
  g_level.store(static_cast<int>(options.level));
  g_format.store(static_cast<int>(options.format));
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void SetLogOutputForTesting(std::string* out) {
  absl::MutexLock lock(&g_mu);
  g_test_out = out;
}

LogLine::~LogLine() {
  EnsureGlog();
  const Pending pending{level_, &fields_};
  tl_pending = &pending;
  const google::LogSeverity severity = level_ == LogLevel::kError     ? google::GLOG_ERROR
                                       : level_ == LogLevel::kWarning ? google::GLOG_WARNING
                                                                      : google::GLOG_INFO;
  google::LogMessage(file_, line_, severity).stream() << message_.str();
  tl_pending = nullptr;
}

}  // namespace gantry
