// Input pipeline: the data-stall fraction (time the trainer waits for its batch / step
// time) of epochs streamed from a worker's dataset cache with prefetch (loader threads + bounded
// queue) against the same epochs reading each batch inline (no prefetch), and the first (cold:
// toy MC simulated, written and verified into an empty cache) epoch against a warm one (cache hit).
// Configurations alternate (A B A B ...) in one process so they share the machine's load.
//   prefetch_bench [--preset=tiny] [--events=2048] [--batch=0] [--steps=16] [--threads=2]
//                  [--depth=4] [--loaders=1] [--rounds=2] [--gzip=1] [--read_delay_ms=0]
//                  [--dir=/tmp/gantry-prefetch-bench]
// --gzip=1 also measures a gzip-chunked copy of the cached file (uploaded user files often are);
// --read_delay_ms adds a sleep before every batch read (simulated remote storage).
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "showers/hdf5_io.h"
#include "showers/shower_file_reader.h"
#include "showers/toy_mc.h"
#include "tests/bench/bench_flags.h"
#include "workers/gan/prefetching_batch_source.h"
#include "workers/gan/trainer.h"
#include "workers/runner/dataset_source.h"
#include "workers/runner/holdout_split.h"

namespace gantry::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double LoadAverage() {
  double load = 0;
  std::ifstream("/proc/loadavg") >> load;
  return load;
}

struct Settings {
  gan::ModelConfig config;
  gan::TrainerOptions trainer;
  int depth = 4;
  int loaders = 1;
  std::chrono::milliseconds read_delay{0};
};

struct EpochFigures {
  double setup_seconds = 0;  // reader open + source + trainer creation
  double epoch_seconds = 0;  // sum of step times
  double wait_seconds = 0;   // time the trainer waited for batches
  int64_t steps = 0;
  double stall() const { return epoch_seconds > 0 ? wait_seconds / epoch_seconds : 0; }
};

// One epoch of `s.trainer.max_steps_per_epoch` steps streamed from `path` (90/10 hold-out split as
// the runner does), prefetching with `depth` batches (0 = inline reads).
absl::StatusOr<EpochFigures> Epoch(const std::string& path, const Settings& s, int depth) {
  const auto start = Clock::now();
  absl::StatusOr<std::unique_ptr<showers::ShowerFileReader>> opened =
      showers::ShowerFileReader::Open(path);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<const showers::ShowerFileReader> reader = std::move(*opened);
  absl::StatusOr<runner::HoldoutSplit> split = runner::SplitHoldout(reader->events(), 0.1, 1);
  if (!split.ok()) return split.status();
  gan::PrefetchOptions prefetch;
  prefetch.queue_depth = depth;
  prefetch.loader_threads = depth > 0 ? s.loaders : 0;
  if (s.read_delay.count() > 0) {
    prefetch.before_read = [delay = s.read_delay] { std::this_thread::sleep_for(delay); };
  }
  absl::StatusOr<std::unique_ptr<gan::PrefetchingBatchSource>> source =
      gan::PrefetchingBatchSource::Create(s.config, reader, split->train, prefetch);
  if (!source.ok()) return source.status();
  absl::StatusOr<std::unique_ptr<gan::Trainer>> trainer =
      gan::Trainer::CreateWithSource(s.config, std::move(*source), s.trainer);
  if (!trainer.ok()) return trainer.status();
  EpochFigures f;
  f.setup_seconds = Since(start);
  absl::StatusOr<gan::EpochReport> epoch = (*trainer)->RunEpoch();
  if (!epoch.ok()) return epoch.status();
  f.epoch_seconds = epoch->seconds;
  f.wait_seconds = epoch->data_wait_seconds;
  f.steps = epoch->steps;
  return f;
}

void Print(const std::string& what, const EpochFigures& f) {
  std::printf("| %s | %lld | %.2f | %.3f | %.1f | %.2f%% | load %.1f\n", what.c_str(),
              static_cast<long long>(f.steps), f.epoch_seconds, f.wait_seconds,
              1e3 * f.wait_seconds / static_cast<double>(std::max<int64_t>(1, f.steps)),
              100 * f.stall(), LoadAverage());
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  const std::string preset = BenchFlag(argc, argv, "preset", "tiny");
  const int64_t events = std::stoll(BenchFlag(argc, argv, "events", "2048"));
  const int rounds = std::stoi(BenchFlag(argc, argv, "rounds", "2"));
  const bool gzip = BenchFlag(argc, argv, "gzip", "1") == "1";
  const std::filesystem::path dir = BenchFlag(argc, argv, "dir", "/tmp/gantry-prefetch-bench");
  Settings s;
  absl::StatusOr<gan::ModelConfig> config = gan::PresetConfig(preset);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 2;
  }
  s.config = *config;
  s.trainer.batch_size = std::stoll(BenchFlag(argc, argv, "batch", "0"));
  s.trainer.max_steps_per_epoch = std::stoll(BenchFlag(argc, argv, "steps", "16"));
  s.trainer.threads = std::stoi(BenchFlag(argc, argv, "threads", "2"));
  s.trainer.epochs = 1;
  s.trainer.seed = 3;
  s.depth = std::stoi(BenchFlag(argc, argv, "depth", "4"));
  s.loaders = std::stoi(BenchFlag(argc, argv, "loaders", "1"));
  s.read_delay = std::chrono::milliseconds(std::stoi(BenchFlag(argc, argv, "read_delay_ms", "0")));
  const std::string reference = absl::StrCat("toymc:layout=", s.config.grid[0] == 51 ? 51 : 25,
                                             ",events=", events, ",seed=11,emin=10,emax=500");
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::filesystem::create_directories(dir);
  std::printf(
      "prefetch_bench: preset %s, %s, batch %lld, %lld steps an epoch, %d threads, "
      "prefetch depth %d with %d loader(s), read delay %lld ms, %u hardware threads\n",
      preset.c_str(), reference.c_str(),
      static_cast<long long>(s.trainer.batch_size > 0 ? s.trainer.batch_size
                                                      : s.config.default_batch),
      static_cast<long long>(s.trainer.max_steps_per_epoch), s.trainer.threads, s.depth, s.loaders,
      static_cast<long long>(s.read_delay.count()), std::thread::hardware_concurrency());

  // Warm-up: LibTorch's first steps (oneDNN primitives, allocator) on a throwaway in-memory
  // trainer, so the cold epoch below is not charged for them.
  {
    showers::ToyMcConfig mc;
    mc.layout = s.config.grid[0] == 51 ? showers::Layout::kVariableAngle3DGan
                                       : showers::Layout::kFixedAngle3DGan;
    mc.events = 2 * (s.trainer.batch_size > 0 ? s.trainer.batch_size : s.config.default_batch);
    mc.energy_min_gev = 50;
    absl::StatusOr<showers::ShowerSet> warm = showers::SimulateToyMc(mc);
    gan::TrainerOptions o = s.trainer;
    o.max_steps_per_epoch = 2;
    absl::StatusOr<std::unique_ptr<gan::Trainer>> t =
        warm.ok() ? gan::Trainer::Create(s.config, *warm, o)
                  : absl::StatusOr<std::unique_ptr<gan::Trainer>>(warm.status());
    if (!t.ok() || !(*t)->RunEpoch().ok()) {
      std::fprintf(stderr, "warm-up failed\n");
      return 1;
    }
  }

  // 1. Cold (empty cache: simulate, write, verify, pin) against warm (cache hit) epochs.
  runner::DatasetSourceOptions source_options;
  source_options.cache_dir = (dir / "cache").string();
  source_options.threads = s.trainer.threads;
  source_options.load_showers = false;
  runner::DatasetSource source(source_options);
  std::printf(
      "\n| epoch | steps | step time (s) | waited (s) | data stall | materialise (s) | "
      "setup (s) | total (s) |\n|---|---|---|---|---|---|---|---|\n");
  std::string cached_path;
  for (const char* kind : {"cold (cache filled)", "warm (cache hit)"}) {
    const auto start = Clock::now();
    absl::StatusOr<runner::MaterializedDataset> dataset = source.Materialize(reference, "");
    if (!dataset.ok()) {
      std::fprintf(stderr, "%s\n", dataset.status().ToString().c_str());
      return 1;
    }
    const double materialise = Since(start);
    cached_path = dataset->local_path;
    absl::StatusOr<EpochFigures> f = Epoch(dataset->local_path, s, s.depth);
    if (!f.ok()) {
      std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
      return 1;
    }
    std::printf("| %s | %lld | %.2f | %.3f | %.2f%% | %.2f | %.2f | %.2f | load %.1f %s\n", kind,
                static_cast<long long>(f->steps), f->epoch_seconds, f->wait_seconds,
                100 * f->stall(), materialise, f->setup_seconds, Since(start), LoadAverage(),
                dataset->from_cache ? "(from_cache)" : "(filled)");
    std::fflush(stdout);
  }

  // 2. Data stall with and without prefetch on the cached file (and a gzip copy), alternating.
  std::vector<std::pair<std::string, std::string>> files = {{"cached (uncompressed)", cached_path}};
  if (gzip) {
    absl::StatusOr<showers::ShowerSet> all = showers::ReadShowerFile(cached_path);
    const std::string gz = (dir / "gzip4.h5").string();
    if (!all.ok() || !showers::WriteShowerFile(gz, *all).ok()) {
      std::fprintf(stderr, "cannot write the gzip copy\n");
      return 1;
    }
    files.push_back({"gzip-4 copy", gz});
  }
  std::printf(
      "\n| file, pipeline | steps | step time (s) | waited (s) | waited per step (ms) | "
      "data stall |\n|---|---|---|---|---|---|\n");
  for (int round = 0; round < rounds; ++round) {
    for (const auto& [name, path] : files) {
      for (const int depth : {s.depth, 0}) {
        absl::StatusOr<EpochFigures> f = Epoch(path, s, depth);
        if (!f.ok()) {
          std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
          return 1;
        }
        Print(absl::StrCat(name, ", ",
                           depth > 0 ? absl::StrCat("prefetch ", depth, " x ", s.loaders)
                                     : std::string("inline reads (no prefetch)"),
                           " [round ", round + 1, "]"),
              *f);
      }
    }
  }
  std::filesystem::remove_all(dir, ignored);
  return 0;
}

}  // namespace
}  // namespace gantry::bench

int main(int argc, char** argv) { return gantry::bench::Main(argc, argv); }
