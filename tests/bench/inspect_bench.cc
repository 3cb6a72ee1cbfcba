// Benchmark: the latency an upload's sandboxed inspection adds. For toy-MC files of a few sizes,
// the median and 90th percentile of InspectShowerFile in this process against
// SandboxedInspector::Inspect (fork + exec of gantry-inspect with its rlimits and network
// namespace, the file passed as fd 3); then reading every cell of the file through gantry's chunk
// reader (showers/chunk_reader.h, what inspection and the workers use) against libhdf5's H5Dread
// of the same rows (which gantry no longer uses for chunked data: it is unsafe on hostile files).
// Usage: inspect_bench [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "showers/chunk_reader.h"
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
    std::vector<float> cells;
    auto read_all = [&](bool libhdf5) {
      h5::LibraryLock lock;
      absl::StatusOr<h5::ShowerFile> f =
          h5::OpenShowerFile(h5::FileSource{path, "", {}}, gantry::showers::ShowerFileLimits{});
      if (!f.ok() || f->cells.chunks == nullptr) return false;
      cells.resize(static_cast<size_t>(f->events * f->shape[0] * f->shape[1] * f->shape[2]));
      if (!libhdf5) return h5::ReadRows(path, f->cells, 0, f->events, cells.data()).ok();
      return H5Dread(f->cells.id.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                     cells.data()) >= 0;
    };
    const Stats by_libhdf5 = Measure(repeats, [&] { return read_all(true); });
    const std::vector<float> via_libhdf5 = cells;
    const Stats by_gantry = Measure(repeats, [&] { return read_all(false); });
    if (cells != via_libhdf5) {
      std::fprintf(stderr, "the two readers disagree on %s\n", path.c_str());
      return 1;
    }
    char row[256];
    std::snprintf(row, sizeof(row), "| %d | %.2f | %.2f | %.2f | %.2f |\n", events,
                  by_libhdf5.median_ms, by_gantry.median_ms,
                  by_gantry.median_ms / by_libhdf5.median_ms, direct.median_ms);
    chunk_rows.push_back(row);
    std::remove(path.c_str());
  }
  std::printf(
      "\n| events | open + read all cells, libhdf5 H5Dread, median ms | open + read all cells, "
      "gantry ChunkReader, median ms | ratio | whole inspection median ms "
      "|\n|---|---|---|---|---|\n");
  for (const std::string& row : chunk_rows) std::printf("%s", row.c_str());
  return 0;
}
