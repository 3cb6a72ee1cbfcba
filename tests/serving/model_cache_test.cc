// ModelCache with a fake loader: one load under concurrency, least-recently-used unloading within
// the memory budget, never unloading a model that serves a request, load failures.
#include "workers/serving/model_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/serving/fake_backend.h"

namespace gantry::serving {
namespace {

namespace v1 = ::gantry::v1;
using testing::FakeBackend;

v1::ServedModel Model(char c) {
  v1::ServedModel m;
  m.set_checkpoint_sha256(std::string(64, c));
  return m;
}

struct Loads {
  std::atomic<int> calls{0};
  std::atomic<int> destroyed{0};
  absl::Duration delay = absl::ZeroDuration();
  ModelLoader Loader(int64_t bytes) {
    return
        [this, bytes](const v1::ServedModel& m) -> absl::StatusOr<std::unique_ptr<BatchBackend>> {
          ++calls;
          absl::SleepFor(delay);
          if (m.checkpoint_sha256()[0] == 'f') return absl::NotFoundError("no such checkpoint");
          return std::unique_ptr<BatchBackend>(std::make_unique<FakeBackend>(bytes, &destroyed));
        };
  }
};

std::vector<std::string> Loaded(const ModelCache& cache) {
  std::vector<std::string> out;
  for (const auto& m : cache.Snapshot()) out.push_back(m.checkpoint_sha256.substr(0, 1));
  return out;
}

TEST(ModelCacheTest, ConcurrentRequestsShareOneLoad) {
  Loads loads;
  loads.delay = absl::Milliseconds(200);
  ModelCache cache({}, loads.Loader(100), nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      absl::StatusOr<ModelCache::Lease> lease = cache.Acquire(Model('a'));
      if (lease.ok() && (*lease)->memory_bytes() == 100) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(loads.calls.load(), 1);
  EXPECT_EQ(cache.loads(), 1);
  EXPECT_EQ(cache.loaded_bytes(), 100);
}

TEST(ModelCacheTest, UnloadsTheLeastRecentlyUsedIdleModelWhenFull) {
  Loads loads;
  ModelCacheOptions o;
  o.max_bytes = 300;
  ModelCache cache(o, loads.Loader(100), nullptr);
  for (char c : {'a', 'b', 'c'}) ASSERT_TRUE(cache.Acquire(Model(c)).ok());
  absl::SleepFor(absl::Milliseconds(2));
  ASSERT_TRUE(cache.Acquire(Model('a')).ok());  // a is now the most recently used
  ASSERT_TRUE(cache.Acquire(Model('d')).ok());
  EXPECT_EQ(Loaded(cache), (std::vector<std::string>{"d", "a", "c"}));
  EXPECT_EQ(loads.destroyed.load(), 1);  // b's generator object is gone
  EXPECT_EQ(cache.unloads(), 1);
  EXPECT_EQ(cache.loaded_bytes(), 300);
  ASSERT_TRUE(cache.Acquire(Model('b')).ok());  // loaded again
  EXPECT_EQ(loads.calls.load(), 5);
}

TEST(ModelCacheTest, NeverUnloadsAModelServingARequest) {
  Loads loads;
  ModelCacheOptions o;
  o.max_bytes = 200;
  ModelCache cache(o, loads.Loader(100), nullptr);
  absl::StatusOr<ModelCache::Lease> a = cache.Acquire(Model('a'));  // held: serving
  ASSERT_TRUE(a.ok());
  absl::SleepFor(absl::Milliseconds(2));
  ASSERT_TRUE(cache.Acquire(Model('b')).ok());
  ASSERT_TRUE(cache.Acquire(Model('c')).ok());  // a is older but leased: b goes
  EXPECT_EQ(Loaded(cache), (std::vector<std::string>{"c", "a"}));
  // With every slot leased, a new model does not fit: RESOURCE_EXHAUSTED, nothing unloaded.
  absl::StatusOr<ModelCache::Lease> c = cache.Acquire(Model('c'));
  ASSERT_TRUE(c.ok());
  absl::StatusOr<ModelCache::Lease> d = cache.Acquire(Model('d'));
  ASSERT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(d.status().message().find("retry"), std::string::npos) << d.status();
  EXPECT_EQ(Loaded(cache).size(), 2u);
  c->Release();
  EXPECT_TRUE(cache.Acquire(Model('d')).ok());
  EXPECT_EQ(Loaded(cache), (std::vector<std::string>{"d", "a"}));
}

TEST(ModelCacheTest, PinnedModelIsWarmWithItsSettingsAndNeverEvicted) {
  Loads loads;
  ModelCacheOptions o;
  o.max_bytes = 200;
  o.batcher.max_batch_size = 64;
  ModelCache cache(o, loads.Loader(100), nullptr);
  BatcherOptions pinned = o.batcher;
  pinned.max_batch_size = 4;
  pinned.max_queued_requests = 1;
  pinned.priority_levels = 3;
  absl::StatusOr<ModelCache::PinResult> r = cache.Pin(Model('a'), pinned);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->memory_bytes, 100);
  EXPECT_EQ(r->batcher, pinned);
  std::vector<ModelCache::LoadedModel> snapshot = cache.Snapshot();
  ASSERT_EQ(snapshot.size(), 1u);
  EXPECT_TRUE(snapshot[0].pinned);
  EXPECT_EQ(snapshot[0].stats.batches, 1);  // the warm-up batch ran
  EXPECT_EQ(snapshot[0].batcher.max_batch_size, 4);
  // a is the least recently used idle model, but pinned: b goes instead.
  absl::SleepFor(absl::Milliseconds(2));
  ASSERT_TRUE(cache.Acquire(Model('b')).ok());
  ASSERT_TRUE(cache.Acquire(Model('c')).ok());
  EXPECT_EQ(Loaded(cache), (std::vector<std::string>{"c", "a"}));
  {
    absl::StatusOr<ModelCache::Lease> a = cache.Acquire(Model('a'));
    ASSERT_TRUE(a.ok());
    EXPECT_EQ((*a)->batcher().options().max_queued_requests, 1);
  }
  // Pinning again with other settings keeps the generator (no new load) behind a new batcher.
  pinned.max_batch_size = 8;
  ASSERT_TRUE(cache.Pin(Model('a'), pinned).ok());
  EXPECT_EQ(loads.calls.load(), 3);
  for (const ModelCache::LoadedModel& m : cache.Snapshot()) {
    if (m.checkpoint_sha256[0] == 'a') EXPECT_EQ(m.batcher.max_batch_size, 8);
    if (m.checkpoint_sha256[0] == 'c') EXPECT_EQ(m.batcher.max_batch_size, 64);
  }
}

TEST(ModelCacheTest, UnpinUnloadsAtOnceOrAfterTheLastLease) {
  Loads loads;
  ModelCache cache({}, loads.Loader(100), nullptr);
  ASSERT_TRUE(cache.Pin(Model('a'), cache.default_batcher()).ok());
  ModelCache::UnpinResult r = cache.Unpin(std::string(64, 'a'));
  EXPECT_TRUE(r.was_loaded);
  EXPECT_TRUE(r.unloaded);
  EXPECT_TRUE(Loaded(cache).empty());
  EXPECT_EQ(loads.destroyed.load(), 1);

  ASSERT_TRUE(cache.Pin(Model('b'), cache.default_batcher()).ok());
  absl::StatusOr<ModelCache::Lease> b = cache.Acquire(Model('b'));  // a request in flight
  ASSERT_TRUE(b.ok());
  r = cache.Unpin(std::string(64, 'b'));
  EXPECT_TRUE(r.was_loaded);
  EXPECT_FALSE(r.unloaded);
  EXPECT_EQ(Loaded(cache), std::vector<std::string>{"b"});
  b->Release();
  EXPECT_TRUE(Loaded(cache).empty());
  EXPECT_EQ(loads.destroyed.load(), 2);
  EXPECT_FALSE(cache.Unpin(std::string(64, 'b')).was_loaded);
}

TEST(ModelCacheTest, AModelLargerThanTheBudgetIsRefused) {
  Loads loads;
  ModelCacheOptions o;
  o.max_bytes = 50;
  ModelCache cache(o, loads.Loader(100), nullptr);
  auto r = cache.Acquire(Model('a'));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("--model-cache-bytes=50"), std::string::npos) << r.status();
  EXPECT_EQ(loads.destroyed.load(), 1);
  EXPECT_EQ(cache.loaded_bytes(), 0);
}

TEST(ModelCacheTest, LoadFailureReachesEveryWaiterAndIsRetriedLater) {
  Loads loads;
  loads.delay = absl::Milliseconds(100);
  ModelCache cache({}, loads.Loader(100), nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> not_found{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      if (cache.Acquire(Model('f')).status().code() == absl::StatusCode::kNotFound) ++not_found;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(not_found.load(), 4);
  EXPECT_LE(loads.calls.load(), 2);  // waiters share a load (a late thread may start a new one)
  EXPECT_TRUE(cache.Snapshot().empty());
  EXPECT_EQ(cache.Acquire(Model('x')).status().code(), absl::StatusCode::kInvalidArgument)
      << "not a sha256";
}

}  // namespace
}  // namespace gantry::serving
