// GenerationProgress: the progress bar of `gantry generate` (showers done/total, rate, ETA),
// redrawn in place on a terminal and printed as periodic lines otherwise. Pure logic with the time
// passed in, so tests drive it with a fake clock.
#ifndef GANTRY_CLIENTS_CLI_GENERATION_PROGRESS_H_
#define GANTRY_CLIENTS_CLI_GENERATION_PROGRESS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace gantry::cli {

class GenerationProgress {
 public:
  // `total` showers are expected; `tty` selects redrawing with '\r' (at most every
  // `tty_interval`) instead of one line per `line_interval`.
  GenerationProgress(int64_t total, bool tty, absl::Time start,
                     absl::Duration tty_interval = absl::Milliseconds(100),
                     absl::Duration line_interval = absl::Seconds(5));

  // Records that `done` showers have arrived by `now`. Returns the text to write to stderr now
  // (empty when nothing is due): on a TTY "\r<bar>", otherwise "<bar>\n".
  std::string Update(int64_t done, absl::Time now);
  // The final state: always returns the bar once more, ending with '\n' (on a TTY too).
  std::string Finish(int64_t done, absl::Time now);

  // One bar, e.g. "[##########----------]  4096/100000 showers  1234.5/s  ETA 1m18s". The rate is
  // the mean since start; ETA "-" until a rate is known.
  std::string Line(int64_t done, absl::Time now) const;

 private:
  const int64_t total_;
  const bool tty_;
  const absl::Time start_;
  const absl::Duration tty_interval_;
  const absl::Duration line_interval_;
  absl::Time last_shown_ = absl::InfinitePast();
};

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_GENERATION_PROGRESS_H_
