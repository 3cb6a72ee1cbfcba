// FillCacheEntry: puts `bytes` into the worker's dataset cache under their sha256, as an earlier
// run of a rank would have left them (for tests of what the daemon reports and evicts).
#ifndef GANTRY_TESTS_AGENT_CACHE_ENTRY_H_
#define GANTRY_TESTS_AGENT_CACHE_ENTRY_H_

#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/sha256.h"
#include "workers/runner/dataset_cache.h"

namespace gantry::testing {

// Fills the entry sha256(bytes) of the dataset cache at `cache_dir`.
inline absl::Status FillCacheEntry(const std::string& cache_dir, const std::string& bytes) {
  runner::DatasetCacheOptions options;
  options.cache_dir = cache_dir;
  absl::StatusOr<std::unique_ptr<runner::DatasetCache>> cache =
      runner::DatasetCache::Create(options);
  if (!cache.ok()) return cache.status();
  runner::DatasetFill fill;
  fill.source = "test";
  fill.fill =
      [&bytes](const std::string& part) -> absl::StatusOr<std::map<std::string, std::string>> {
    std::ofstream(part, std::ios::binary) << bytes;
    return std::map<std::string, std::string>{};
  };
  return (*cache)->Acquire(Sha256Hex(bytes), fill).status();
}

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_AGENT_CACHE_ENTRY_H_
