// Benchmark: the latency an upload's sandboxed inspection adds. For toy-MC files of a few sizes,
// the median and 90th percentile of InspectShowerFile in this process against
// SandboxedInspector::Inspect (fork + exec of gantry-inspect with its rlimits and network
// namespace, the file passed as fd 3); then what the chunk checks (showers/chunk_guard.h) add to
// the in-process inspection: opening the file alone against opening it and checking every chunk
// of its cells. Usage: inspect_bench [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "showers/chunk_guard.h"
#include "showers/hdf5_common.h"
#include "showers/hdf5_io.h"
#include "showers/sandboxed_inspector.h"
#include "showers/toy_mc.h"
#include "tests/support/build_paths.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median_ms = 0, p90_ms = 0;
};

template <typename Fn>
Stats Measure(int repeats, Fn&& fn) {
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    if (!fn()) {
      std::fprintf(stderr, "inspection failed\n");
      std::exit(1);
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[ms.size() * 9 / 10]};
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 50;
  gantry::showers::InspectorOptions options;
  options.binary = GANTRY_INSPECT_BINARY;
  const gantry::showers::SandboxedInspector inspector(options);
  std::printf(
      "| events | file MiB | in-process median / p90 ms | sandboxed median / p90 ms | added "
      "median ms |\n|---|---|---|---|---|\n");
  std::vector<std::string> chunk_rows;
  for (int events : {10, 1000, 10000}) {
    gantry::showers::ToyMcConfig config;
    config.events = events;
    config.seed = 5;
    config.threads = 2;
    const std::string path = "/tmp/inspect_bench_" + std::to_string(events) + ".h5";
    if (!gantry::showers::WriteShowerFile(path, *gantry::showers::SimulateToyMc(config)).ok()) {
      return 1;
    }
    FILE* f = std::fopen(path.c_str(), "rb");
    std::fseek(f, 0, SEEK_END);
    const double mib = static_cast<double>(std::ftell(f)) / (1 << 20);
    std::fclose(f);
    const Stats direct =
        Measure(repeats, [&] { return gantry::showers::InspectShowerFile(path).ok(); });
    const Stats sandboxed =
        Measure(repeats, [&] { return inspector.Inspect(path, "Ele_bench.h5").ok(); });
    std::printf("| %d | %.2f | %.2f / %.2f | %.2f / %.2f | %.2f |\n", events, mib, direct.median_ms,
                direct.p90_ms, sandboxed.median_ms, sandboxed.p90_ms,
                sandboxed.median_ms - direct.median_ms);
    namespace h5 = gantry::showers::h5;
    auto open = [&](bool check_chunks) {
      h5::LibraryLock lock;
      absl::StatusOr<h5::ShowerFile> f =
          h5::OpenShowerFile(h5::FileSource{path, "", {}}, gantry::showers::ShowerFileLimits{});
      return f.ok() && (!check_chunks ||
                        (f->cells.chunks != nullptr &&
                         f->cells.chunks->CheckRows(path, f->cells.id.get(), 0, f->events).ok()));
    };
    const Stats opened = Measure(repeats, [&] { return open(false); });
    const Stats checked = Measure(repeats, [&] { return open(true); });
    char row[256];
    std::snprintf(row, sizeof(row), "| %d | %.2f | %.2f | %.2f | %.2f | %.1f%% |\n", events,
                  opened.median_ms, checked.median_ms, checked.median_ms - opened.median_ms,
                  direct.median_ms,
                  100 * (checked.median_ms - opened.median_ms) / direct.median_ms);
    chunk_rows.push_back(row);
    std::remove(path.c_str());
  }
  std::printf(
      "\n| events | open median ms | open + chunk checks median ms | chunk checks ms | whole "
      "inspection median ms | share |\n|---|---|---|---|---|---|\n");
  for (const std::string& row : chunk_rows) std::printf("%s", row.c_str());
  return 0;
}
