// runner_cache_tool: a second process using the same DatasetCache directory as a test, so the tests
// exercise the cross-process parts (pins held by another process, fills serialised per key).
//   hold <cache_dir> <key>
//       acquires the complete entry, prints "pinned <path>" and sleeps until killed.
//   fill <cache_dir> <key> <source_file> <delay_ms> <count_file>
//       acquires `key`, filling it (when missing) by copying source_file slowly (delay_ms) and
//       appending one line to count_file; prints "filled" or "reused".
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "workers/runner/dataset_cache.h"

namespace {

using gantry::runner::DatasetCache;

int Fail(const std::string& what) {
  std::cout << "error: " << what << std::endl;
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return Fail("usage: hold|fill <cache_dir> <key> ...");
  const std::string command = argv[1];
  gantry::runner::DatasetCacheOptions options;
  options.cache_dir = argv[2];
  absl::StatusOr<std::unique_ptr<DatasetCache>> cache = DatasetCache::Create(options);
  if (!cache.ok()) return Fail(cache.status().ToString());
  const std::string key = argv[3];
  if (command == "hold") {
    absl::StatusOr<DatasetCache::Lease> lease = (*cache)->AcquireCached(key);
    if (!lease.ok()) return Fail(lease.status().ToString());
    std::cout << "pinned " << lease->path() << std::endl;
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (command == "fill" && argc == 7) {
    const std::string source = argv[4];
    const int delay_ms = std::stoi(argv[5]);
    const std::string count_file = argv[6];
    gantry::runner::DatasetFill fill;
    fill.source = "test:" + source;
    fill.fill = [&](const std::string& part) -> absl::StatusOr<std::map<std::string, std::string>> {
      {
        std::ofstream count(count_file, std::ios::app);
        count << "fill by " << ::getpid() << "\n";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      std::ifstream in(source, std::ios::binary);
      std::ofstream out(part, std::ios::binary | std::ios::trunc);
      out << in.rdbuf();
      return std::map<std::string, std::string>{{"filler", std::to_string(::getpid())}};
    };
    absl::StatusOr<DatasetCache::Lease> lease = (*cache)->Acquire(key, fill);
    if (!lease.ok()) return Fail(lease.status().ToString());
    std::cout << (lease->filled() ? "filled" : "reused") << std::endl;
    return 0;
  }
  return Fail("unknown command " + command);
}
