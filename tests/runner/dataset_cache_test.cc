// Tests of the worker's DatasetCache on real files, with real second processes (runner_cache_tool)
// for pins held elsewhere and concurrent fills: reuse without refilling, verification of every
// acquisition (a flipped byte of the same size is refilled), .part files never counted, LRU
// eviction that survives a new instance, pinned entries never evicted.
#include "workers/runner/dataset_cache.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace fs = std::filesystem;
using runner::DatasetCache;
using runner::DatasetCacheOptions;
using runner::DatasetFill;
using Attributes = std::map<std::string, std::string>;

using ::gantry::testing::ReadFile;

// `size` bytes derived from `seed`.
std::string Content(const std::string& seed, size_t size) {
  std::string out;
  while (out.size() < size) out += Sha256Hex(seed + std::to_string(out.size()));
  out.resize(size);
  return out;
}

std::unique_ptr<DatasetCache> NewCache(const std::string& dir, int64_t max_bytes = 0,
                                       std::vector<std::string>* log = nullptr) {
  DatasetCacheOptions options;
  options.cache_dir = dir;
  options.max_bytes = max_bytes;
  if (log != nullptr) options.log = [log](const std::string& line) { log->push_back(line); };
  absl::StatusOr<std::unique_ptr<DatasetCache>> cache = DatasetCache::Create(options);
  EXPECT_TRUE(cache.ok()) << cache.status();
  return cache.ok() ? *std::move(cache) : nullptr;
}

// A fill that writes `bytes` and counts its calls.
DatasetFill WriteFill(const std::string& bytes, int* calls, const std::string& source = "test") {
  DatasetFill fill;
  fill.source = source;
  fill.fill = [bytes, calls](const std::string& part) -> absl::StatusOr<Attributes> {
    ++*calls;
    std::ofstream(part, std::ios::binary | std::ios::trunc) << bytes;
    return Attributes{{"note", "x y"}};
  };
  return fill;
}

// Waits until `child`'s output contains `text`.
bool WaitForOutput(ChildProcess& child, const std::string& text, int timeout_ms = 10000) {
  for (int waited = 0; waited < timeout_ms; waited += 20) {
    if (child.Log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(DatasetCacheTest, FillsOnceThenReusesAndSurvivesANewInstance) {
  TempDir dir;
  const std::string bytes = Content("a", 5000);
  const std::string key = Sha256Hex(bytes);
  int calls = 0;
  std::unique_ptr<DatasetCache> cache = NewCache(dir.path());
  absl::StatusOr<DatasetCache::Lease> first = cache->Acquire(key, WriteFill(bytes, &calls, "ds-1"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->filled());
  EXPECT_EQ(first->path(), dir.path() + "/datasets/" + key + ".h5");
  EXPECT_EQ(ReadFile(first->path()), bytes);
  EXPECT_EQ(first->entry().sha256, key);
  EXPECT_EQ(first->entry().size_bytes, 5000);
  EXPECT_EQ(first->entry().source, "ds-1");
  EXPECT_EQ(first->entry().attributes.at("note"), "x y");
  EXPECT_FALSE(fs::exists(dir.path() + "/datasets/" + key + ".h5.part"));

  absl::StatusOr<DatasetCache::Lease> second = cache->Acquire(key, WriteFill(bytes, &calls));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->filled());
  EXPECT_EQ(calls, 1);
  EXPECT_GT(second->entry().last_used, first->entry().last_used);
  EXPECT_EQ(second->entry().created, first->entry().created);

  // A worker restart: a new instance over the same directory sees and reuses the entry.
  std::unique_ptr<DatasetCache> restarted = NewCache(dir.path());
  runner::DatasetCacheSummary summary = restarted->Summary();
  EXPECT_EQ(summary.keys, std::vector<std::string>{key});
  EXPECT_EQ(summary.bytes, 5000);
  absl::StatusOr<DatasetCache::Lease> third = restarted->AcquireCached(key);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->entry().attributes.at("note"), "x y");
  EXPECT_EQ(calls, 1);

  EXPECT_EQ(cache->Acquire("not-a-key", WriteFill(bytes, &calls)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->AcquireCached(Sha256Hex("other")).status().code(), absl::StatusCode::kNotFound);
}

TEST(DatasetCacheTest, CorruptedFileOfTheSameSizeIsDetectedAndRefilled) {
  TempDir dir;
  const std::string bytes = Content("b", 3000);
  const std::string key = Sha256Hex(bytes);
  int calls = 0;
  std::unique_ptr<DatasetCache> cache = NewCache(dir.path());
  ASSERT_TRUE(cache->Acquire(key, WriteFill(bytes, &calls)).ok());
  const std::string path = cache->DataPath(key);
  auto flip = [&path] {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekg(1234);
    char c = 0;
    f.read(&c, 1);
    f.seekp(1234);
    c = static_cast<char>(c ^ 0x01);
    f.write(&c, 1);
  };
  flip();
  ASSERT_EQ(fs::file_size(path), 3000u);
  ASSERT_NE(ReadFile(path), bytes);

  absl::StatusOr<DatasetCache::Lease> again = cache->Acquire(key, WriteFill(bytes, &calls));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->filled());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(ReadFile(path), bytes);

  // Without a filler the corruption is DATA_LOSS and the entry is gone.
  flip();
  absl::StatusOr<DatasetCache::Lease> cached = cache->AcquireCached(key);
  EXPECT_EQ(cached.status().code(), absl::StatusCode::kDataLoss) << cached.status();
  EXPECT_TRUE(cache->Summary().keys.empty());
  EXPECT_FALSE(fs::exists(path));
}

TEST(DatasetCacheTest, BytesNotHashingToTheKeyAreRefusedAndLeaveNothing) {
  TempDir dir;
  int calls = 0;
  std::unique_ptr<DatasetCache> cache = NewCache(dir.path());
  const std::string key = Sha256Hex("what the server announced");
  absl::StatusOr<DatasetCache::Lease> bad = cache->Acquire(key, WriteFill("other bytes", &calls));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss) << bad.status();
  EXPECT_TRUE(fs::is_empty(dir.path() + "/datasets"));

  // A key that is not a content hash (toymc: hashes the spec) records the file's own hash.
  DatasetFill fill = WriteFill("simulated", &calls);
  fill.key_is_content_sha256 = false;
  absl::StatusOr<DatasetCache::Lease> spec_keyed = cache->Acquire(key, fill);
  ASSERT_TRUE(spec_keyed.ok()) << spec_keyed.status();
  EXPECT_EQ(spec_keyed->entry().key, key);
  EXPECT_EQ(spec_keyed->entry().sha256, Sha256Hex("simulated"));
  spec_keyed = DatasetCache::Lease();
  EXPECT_TRUE(cache->AcquireCached(key).ok());
}

TEST(DatasetCacheTest, PartialFillsAreNeitherListedNorCountedAndResume) {
  TempDir dir;
  const std::string bytes = Content("c", 4000);
  const std::string key = Sha256Hex(bytes);
  std::unique_ptr<DatasetCache> cache = NewCache(dir.path());
  // An interrupted fill leaves its first half in the .part.
  DatasetFill broken;
  broken.source = "ds-broken";
  broken.fill = [&bytes](const std::string& part) -> absl::StatusOr<Attributes> {
    std::ofstream(part, std::ios::binary | std::ios::trunc) << bytes.substr(0, 2000);
    return absl::UnavailableError("connection lost");
  };
  EXPECT_EQ(cache->Acquire(key, broken).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_EQ(fs::file_size(dir.path() + "/datasets/" + key + ".h5.part"), 2000u);
  EXPECT_TRUE(cache->List().empty());
  EXPECT_EQ(cache->Summary().bytes, 0);
  EXPECT_EQ(cache->AcquireCached(key).status().code(), absl::StatusCode::kNotFound);

  // The next fill finds the part and appends the rest.
  int64_t found = -1;
  DatasetFill resume;
  resume.fill = [&](const std::string& part) -> absl::StatusOr<Attributes> {
    found = static_cast<int64_t>(fs::file_size(part));
    std::ofstream(part, std::ios::binary | std::ios::app) << bytes.substr(found);
    return Attributes{};
  };
  absl::StatusOr<DatasetCache::Lease> done = cache->Acquire(key, resume);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(found, 2000);
  EXPECT_EQ(ReadFile(done->path()), bytes);
  EXPECT_EQ(cache->Summary().bytes, 4000);
}

TEST(DatasetCacheTest, EvictsLeastRecentlyUsedAndTheOrderSurvivesANewInstance) {
  TempDir dir;
  std::vector<std::string> keys;
  int calls = 0;
  {
    std::unique_ptr<DatasetCache> cache = NewCache(dir.path());  // no limit
    for (const char* seed : {"A", "B", "C"}) {
      const std::string bytes = Content(seed, 1000);
      keys.push_back(Sha256Hex(bytes));
      ASSERT_TRUE(cache->Acquire(keys.back(), WriteFill(bytes, &calls)).ok());
    }
    ASSERT_TRUE(cache->AcquireCached(keys[0]).ok());  // A is now the most recently used
    std::vector<runner::DatasetCacheEntry> order = cache->List();
    ASSERT_EQ(order.size(), 3u);
    EXPECT_EQ(order[0].key, keys[1]);
    EXPECT_EQ(order[1].key, keys[2]);
    EXPECT_EQ(order[2].key, keys[0]);
  }
  // A new instance (a restarted daemon) with a limit of two entries evicts B only.
  std::vector<std::string> log;
  std::unique_ptr<DatasetCache> limited = NewCache(dir.path(), 2000, &log);
  EXPECT_EQ(limited->EvictToLimit(), std::vector<std::string>{keys[1]});
  EXPECT_EQ(limited->Summary().bytes, 2000);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find(keys[1]), std::string::npos) << log[0];
  EXPECT_FALSE(fs::exists(limited->DataPath(keys[1])));
  EXPECT_EQ(limited->EvictToLimit(), std::vector<std::string>{});

  // A fill over the limit evicts the least recently used (C), never the new entry.
  const std::string d_bytes = Content("D", 1000);
  const std::string d = Sha256Hex(d_bytes);
  absl::StatusOr<DatasetCache::Lease> lease = limited->Acquire(d, WriteFill(d_bytes, &calls));
  ASSERT_TRUE(lease.ok()) << lease.status();
  runner::DatasetCacheSummary summary = limited->Summary();
  std::vector<std::string> want = {keys[0], d};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(summary.keys, want);
  EXPECT_EQ(summary.bytes, 2000);
}

TEST(DatasetCacheTest, EntryPinnedByAnotherProcessIsNotEvictedUntilItDies) {
  TempDir dir;
  std::vector<std::string> keys;
  int calls = 0;
  std::unique_ptr<DatasetCache> cache = NewCache(dir.path());
  for (const char* seed : {"P", "Q"}) {
    const std::string bytes = Content(seed, 1000);
    keys.push_back(Sha256Hex(bytes));
    ASSERT_TRUE(cache->Acquire(keys.back(), WriteFill(bytes, &calls)).ok());
  }
  // P is pinned by another process; then Q is used, so P is the least recently used.
  ChildProcess holder({RUNNER_CACHE_TOOL, "hold", dir.path(), keys[0]}, dir.File("hold.log"));
  ASSERT_TRUE(WaitForOutput(holder, "pinned")) << holder.Log();
  ASSERT_TRUE(cache->AcquireCached(keys[1]).ok());
  ASSERT_EQ(cache->List().front().key, keys[0]);

  std::vector<std::string> log;
  std::unique_ptr<DatasetCache> tight = NewCache(dir.path(), 500, &log);
  EXPECT_EQ(tight->EvictToLimit(), std::vector<std::string>{keys[1]});
  EXPECT_EQ(tight->Summary().keys, std::vector<std::string>{keys[0]});
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.back().find("over its limit"), std::string::npos) << log.back();
  EXPECT_NE(log.back().find("pinned"), std::string::npos) << log.back();

  // A pin held in this process counts the same.
  const std::string r_bytes = Content("R", 400);
  absl::StatusOr<DatasetCache::Lease> mine =
      NewCache(dir.path())->Acquire(Sha256Hex(r_bytes), WriteFill(r_bytes, &calls));
  ASSERT_TRUE(mine.ok());

  // kill -9 releases the other process's pin with its file descriptors.
  EXPECT_EQ(holder.Signal(SIGKILL, 5000), 128 + SIGKILL);
  EXPECT_EQ(tight->EvictToLimit(), std::vector<std::string>{keys[0]});
  EXPECT_EQ(tight->Summary().keys, std::vector<std::string>{Sha256Hex(r_bytes)});
  mine = DatasetCache::Lease();
  EXPECT_EQ(tight->EvictToLimit(), std::vector<std::string>{});  // 400 <= 500
}

TEST(DatasetCacheTest, TwoProcessesAcquiringAMissingKeyFillItOnce) {
  TempDir dir;
  const std::string bytes = Content("shared", 200000);
  const std::string source = dir.File("source.bin");
  std::ofstream(source, std::ios::binary) << bytes;
  const std::string key = Sha256Hex(bytes);
  const std::string count = dir.File("fills.txt");
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int i = 0; i < 2; ++i) {
    ranks.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{RUNNER_CACHE_TOOL, "fill", dir.path() + "/cache", key, source,
                                 "700", count},
        dir.File("rank" + std::to_string(i) + ".log")));
  }
  std::string outputs;
  for (auto& rank : ranks) {
    EXPECT_EQ(rank->Wait(20000), 0) << rank->Log();
    outputs += rank->Log();
  }
  const std::string fills = ReadFile(count);
  EXPECT_EQ(std::count(fills.begin(), fills.end(), '\n'), 1) << "not exactly one fill: " << fills;
  EXPECT_NE(outputs.find("filled"), std::string::npos) << outputs;
  EXPECT_NE(outputs.find("reused"), std::string::npos) << outputs;
  std::unique_ptr<DatasetCache> cache = NewCache(dir.path() + "/cache");
  EXPECT_EQ(cache->Summary().keys, std::vector<std::string>{key});
  EXPECT_EQ(ReadFile(cache->DataPath(key)), bytes);
}

}  // namespace
}  // namespace gantry::testing
