#include "clients/cli/generation_progress.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clients/cli/format.h"

namespace gantry::cli {
namespace {
constexpr int kBarWidth = 20;
}  // namespace

GenerationProgress::GenerationProgress(int64_t total, bool tty, absl::Time start,
                                       absl::Duration tty_interval, absl::Duration line_interval)
    : total_(total),
      tty_(tty),
      start_(start),
      tty_interval_(tty_interval),
      line_interval_(line_interval) {}

std::string GenerationProgress::Line(int64_t done, absl::Time now) const {
  const double fraction =
      total_ > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0)
                 : 1.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  const double seconds = absl::ToDoubleSeconds(now - start_);
  std::string rate = "-";
  std::string eta = "-";
  if (seconds > 0 && done > 0) {
    const double per_second = static_cast<double>(done) / seconds;
    rate = absl::StrFormat("%.1f/s", per_second);
    eta = FormatDuration(static_cast<double>(std::max<int64_t>(0, total_ - done)) / per_second);
  }
  return absl::StrCat("[", std::string(filled, '#'), std::string(kBarWidth - filled, '-'), "]  ",
                      done, "/", total_, " showers  ", rate, "  ETA ", eta);
}

std::string GenerationProgress::Update(int64_t done, absl::Time now) {
  const absl::Duration interval = tty_ ? tty_interval_ : line_interval_;
  if (now - last_shown_ < interval) return "";
  last_shown_ = now;
  return tty_ ? absl::StrCat("\r", Line(done, now)) : absl::StrCat(Line(done, now), "\n");
}

std::string GenerationProgress::Finish(int64_t done, absl::Time now) {
  last_shown_ = now;
  return tty_ ? absl::StrCat("\r", Line(done, now), "\n") : absl::StrCat(Line(done, now), "\n");
}

}  // namespace gantry::cli
