// gantry-inspect: inspects one untrusted shower file given as an open file descriptor (never a
// path) and prints an InspectionReport on stdout. gantry-server runs it in a sandboxed child
// (base/sandboxed_process.h) for every upload; an HDF5 parser bug or a memory bomb then ends this
// process only. Exit code 0 whenever a report was printed (also for a refused file).
#include <H5PLpublic.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "base/flags.h"
#include "showers/hdf5_io.h"
#include "showers/inspection_report.h"

ABSL_FLAG(int, fd, 3, "file descriptor of the file to inspect");
ABSL_FLAG(std::string, name, "the file", "the name messages give the file (the user's file name)");
ABSL_FLAG(int64_t, max_events, gantry::showers::ShowerFileLimits{}.max_events,
          "most events accepted in one file");
ABSL_FLAG(int64_t, max_dataset_bytes, gantry::showers::ShowerFileLimits{}.max_dataset_bytes,
          "most uncompressed bytes of one dataset");

int main(int argc, char** argv) {
  bool help = false;
  const absl::StatusOr<std::vector<std::string>> args = gantry::ParseFlags(argc, argv, &help);
  if (help || !args.ok() || !args->empty()) {
    std::fprintf(stderr,
                 "usage: %s [--fd=3] [--name=NAME] [--max-events=N] [--max-dataset-bytes=B]\n",
                 argv[0]);
    return help ? 0 : 2;
  }
  H5PLset_loading_state(0);  // no HDF5 filter plugins: only the library's built-in filters
  gantry::showers::InspectOptions options;
  options.display_name = absl::GetFlag(FLAGS_name);
  options.limits.max_events = absl::GetFlag(FLAGS_max_events);
  options.limits.max_dataset_bytes = absl::GetFlag(FLAGS_max_dataset_bytes);
  const std::string report = gantry::showers::FormatInspectionReport(
      gantry::showers::InspectShowerFd(absl::GetFlag(FLAGS_fd), options));
  return std::fwrite(report.data(), 1, report.size(), stdout) == report.size() &&
                 std::fflush(stdout) == 0
             ? 0
             : 1;
}
