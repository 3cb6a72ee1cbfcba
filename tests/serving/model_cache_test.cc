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
