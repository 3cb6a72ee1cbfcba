// DynamicBatcher with a fake backend: merging up to the max batch, the max queue delay, the
// bounded queue, deadlines, cancellation, round-robin fairness, backpressure and chunking.
#include "workers/serving/dynamic_batcher.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "tests/serving/fake_backend.h"

namespace gantry::serving {
namespace {

namespace v1 = ::gantry::v1;
using testing::FakeBackend;
using Poll = DynamicBatcher::Stream::Poll;

ModelTraits FakeTraits() {
  ModelTraits t;
  t.grid = {2, 2, 2};
  return t;
}

GenerationPlan Plan(uint64_t seed, int64_t count, int chunk = 0, double energy = 100) {
  v1::WorkerGenerateRequest r;
  r.mutable_model()->set_model_ref("m:1");
  v1::ConditionRange* range = r.mutable_request()->mutable_range();
  range->mutable_energy_gev()->set_min(energy);
  range->mutable_energy_gev()->set_max(energy);
  range->set_count(count);
  r.mutable_request()->set_seed(seed);
  r.mutable_request()->set_chunk_showers(chunk);
  absl::StatusOr<GenerationPlan> plan = GenerationPlan::Create(r, FakeTraits());
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

BatcherOptions Options(int max_batch_size, absl::Duration max_queue_delay) {
  BatcherOptions o;
  o.max_batch_size = max_batch_size;
  o.max_queue_delay = max_queue_delay;
  return o;
}

// Reads a stream to its end; the chunks, or the error.
absl::StatusOr<std::vector<DynamicBatcher::Chunk>> ReadAll(
    DynamicBatcher::Stream& stream, absl::Duration timeout = absl::Seconds(20)) {
  std::vector<DynamicBatcher::Chunk> chunks;
  const absl::Time until = absl::Now() + timeout;
  while (absl::Now() < until) {
    DynamicBatcher::Chunk chunk;
    absl::StatusOr<Poll> p = stream.Next(absl::Milliseconds(50), &chunk);
    if (!p.ok()) return p.status();
    if (*p == Poll::kDone) return chunks;
    if (*p == Poll::kChunk) chunks.push_back(std::move(chunk));
  }
  return absl::DeadlineExceededError("test timeout reading the stream");
}

std::set<uint64_t> SeedsIn(const std::vector<ShowerSpec>& batch) {
  std::set<uint64_t> seeds;
  for (const ShowerSpec& s : batch) seeds.insert(s.seed);
  return seeds;
}

TEST(DynamicBatcherTest, MergesConcurrentRequestsUpToMaxBatch) {
  FakeBackend backend;
  BatcherOptions o = Options(8, absl::Seconds(1));
  DynamicBatcher batcher(o, &backend, nullptr);
  std::vector<std::unique_ptr<DynamicBatcher::Stream>> streams;
  const absl::Time start = absl::Now();
  for (int i = 0; i < 20; ++i)
    streams.push_back(*batcher.Submit(Plan(100 + i, 1), absl::InfiniteFuture()));
  for (auto& s : streams) {
    absl::StatusOr<std::vector<DynamicBatcher::Chunk>> chunks = ReadAll(*s);
    ASSERT_TRUE(chunks.ok()) << chunks.status();
    ASSERT_EQ(chunks->size(), 1u);
  }
  const absl::Duration took = absl::Now() - start;
  const auto batches = backend.batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].size(), 8u);
  EXPECT_EQ(batches[1].size(), 8u);
  EXPECT_EQ(batches[2].size(), 4u);  // ran when the oldest of them had waited max_queue_delay
  EXPECT_GE(took, absl::Seconds(1));
  const DynamicBatcher::Stats stats = batcher.stats();
  EXPECT_EQ(stats.batches, 3);
  EXPECT_EQ(stats.batched_showers, 20);
  EXPECT_EQ(stats.largest_batch, 8);
  EXPECT_EQ(stats.queued_showers, 0);
}

TEST(DynamicBatcherTest, SingleShowerWaitsAboutMaxQueueDelay) {
  for (absl::Duration delay : {absl::Milliseconds(0), absl::Milliseconds(150)}) {
    FakeBackend backend;
    BatcherOptions o = Options(64, delay);
    DynamicBatcher batcher(o, &backend, nullptr);
    const absl::Time start = absl::Now();
    auto stream = *batcher.Submit(Plan(7, 1), absl::InfiniteFuture());
    ASSERT_TRUE(ReadAll(*stream).ok());
    const absl::Duration took = absl::Now() - start;
    EXPECT_GE(took, delay);
    EXPECT_LT(took, delay + absl::Milliseconds(500)) << "delay " << delay;
  }
}

TEST(DynamicBatcherTest, FullQueueAnswersResourceExhausted) {
  FakeBackend backend;
  BatcherOptions o = Options(64, absl::Seconds(30));  // nothing runs during the test
  o.max_queued_requests = 2;
  DynamicBatcher batcher(o, &backend, nullptr);
  auto a = batcher.Submit(Plan(1, 1), absl::InfiniteFuture());
  auto b = batcher.Submit(Plan(2, 1), absl::InfiniteFuture());
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = batcher.Submit(Plan(3, 1), absl::InfiniteFuture());
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("2 requests"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("retry"), std::string::npos) << c.status();
  (*a)->Cancel();  // leaving the queue makes room
  EXPECT_TRUE(batcher.Submit(Plan(4, 1), absl::InfiniteFuture()).ok());
}

TEST(DynamicBatcherTest, ExpiredRequestEndsWithDeadlineExceededAndLeavesTheBatches) {
  FakeBackend backend;
  BatcherOptions o = Options(4, absl::Seconds(30));
  DynamicBatcher batcher(o, &backend, nullptr);
  auto late = *batcher.Submit(Plan(1, 2), absl::Now() + absl::Milliseconds(100));
  absl::StatusOr<std::vector<DynamicBatcher::Chunk>> chunks = ReadAll(*late);
  ASSERT_EQ(chunks.status().code(), absl::StatusCode::kDeadlineExceeded) << chunks.status();
  // A full batch of other work runs now; the expired showers are not in it.
  auto other = *batcher.Submit(Plan(2, 4), absl::InfiniteFuture());
  ASSERT_TRUE(ReadAll(*other).ok());
  for (const auto& batch : backend.batches()) EXPECT_EQ(SeedsIn(batch).count(1), 0u);
  EXPECT_EQ(backend.showers_run(), 4);
  EXPECT_EQ(batcher.stats().queued_showers, 0);
}

TEST(DynamicBatcherTest, DeadlineIsEnforcedByTheSchedulerToo) {
  // Nobody reads the stream: the scheduler itself expires the request and never runs it.
  FakeBackend backend;
  BatcherOptions o = Options(4, absl::Seconds(30));
  DynamicBatcher batcher(o, &backend, nullptr);
  auto late = *batcher.Submit(Plan(1, 3), absl::Now() + absl::Milliseconds(50));
  for (int i = 0; i < 100 && batcher.stats().queued_showers > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(batcher.stats().queued_showers, 0);
  auto other = *batcher.Submit(Plan(2, 4), absl::InfiniteFuture());
  ASSERT_TRUE(ReadAll(*other).ok());
  EXPECT_EQ(backend.showers_run(), 4);
  DynamicBatcher::Chunk chunk;
  EXPECT_EQ(late->Next(absl::ZeroDuration(), &chunk).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(DynamicBatcherTest, CancelledRequestIsDroppedFromBatchesNotYetRun) {
  FakeBackend backend;
  // Room for more than both requests, so no batch is full before the cancel: the scheduler waits
  // out the queue delay instead of racing the cancel with a full batch of four.
  BatcherOptions o = Options(8, absl::Seconds(1));
  DynamicBatcher batcher(o, &backend, nullptr);
  auto cancelled = *batcher.Submit(Plan(1, 2), absl::InfiniteFuture());
  auto kept = *batcher.Submit(Plan(2, 2), absl::InfiniteFuture());
  cancelled->Cancel();
  DynamicBatcher::Chunk chunk;
  EXPECT_EQ(cancelled->Next(absl::ZeroDuration(), &chunk).status().code(),
            absl::StatusCode::kCancelled);
  ASSERT_TRUE(ReadAll(*kept).ok());
  ASSERT_EQ(backend.batches().size(), 1u);
  EXPECT_EQ(SeedsIn(backend.batches()[0]), std::set<uint64_t>{2});
}

TEST(DynamicBatcherTest, CancelledDuringItsBatchGetsNothingAndLaterBatchesSkipIt) {
  FakeBackend backend;
  BatcherOptions o = Options(4, absl::ZeroDuration());
  DynamicBatcher batcher(o, &backend, nullptr);
  backend.CloseGate();
  auto stream = *batcher.Submit(Plan(1, 40, 4), absl::InfiniteFuture());
  ASSERT_TRUE(backend.WaitStarted(1, absl::Seconds(5)));
  stream->Cancel();
  backend.OpenGate();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(backend.batches().size(), 1u);  // no batch after the cancel
  EXPECT_EQ(batcher.stats().queued_showers, 0);
  EXPECT_EQ(batcher.stats().active_requests, 0);
}

TEST(DynamicBatcherTest, RoundRobinKeepsSingleShowersFromWaitingBehindBulk) {
  FakeBackend backend;
  BatcherOptions o = Options(8, absl::ZeroDuration());
  DynamicBatcher batcher(o, &backend, nullptr);
  backend.CloseGate();
  auto bulk = *batcher.Submit(Plan(1, 1000, 8), absl::InfiniteFuture());
  ASSERT_TRUE(backend.WaitStarted(1, absl::Seconds(5)));  // bulk's first batch holds the gate
  std::vector<std::unique_ptr<DynamicBatcher::Stream>> singles;
  for (int i = 0; i < 4; ++i)
    singles.push_back(*batcher.Submit(Plan(10 + i, 1), absl::InfiniteFuture()));
  std::thread drain([&] { ASSERT_TRUE(ReadAll(*bulk).ok()); });
  backend.OpenGate();
  for (auto& s : singles) ASSERT_TRUE(ReadAll(*s).ok());
  drain.join();
  const auto batches = backend.batches();
  ASSERT_GE(batches.size(), 2u);
  EXPECT_EQ(SeedsIn(batches[0]), std::set<uint64_t>{1});
  // The very next batch carries all four single showers next to four bulk ones.
  EXPECT_EQ(SeedsIn(batches[1]), (std::set<uint64_t>{1, 10, 11, 12, 13}));
  EXPECT_EQ(batches[1].size(), 8u);
}

TEST(DynamicBatcherTest, HigherPriorityIsServedFirstWithinTheQueue) {
  FakeBackend backend;
  BatcherOptions o = Options(2, absl::ZeroDuration());
  o.priority_levels = 3;
  DynamicBatcher batcher(o, &backend, nullptr);
  backend.CloseGate();
  auto first = *batcher.Submit(Plan(1, 2), absl::InfiniteFuture());
  ASSERT_TRUE(backend.WaitStarted(1, absl::Seconds(5)));  // holds the gate; the rest queue
  // Arrival order: low, middle, high (priority 9 is capped at 2), then another low.
  auto low = *batcher.Submit(Plan(10, 2), absl::InfiniteFuture(), 0);
  auto middle = *batcher.Submit(Plan(20, 2), absl::InfiniteFuture(), 1);
  auto high = *batcher.Submit(Plan(30, 2), absl::InfiniteFuture(), 9);
  auto low2 = *batcher.Submit(Plan(40, 2), absl::InfiniteFuture(), -3);
  backend.OpenGate();
  for (auto* s : {&first, &low, &middle, &high, &low2}) ASSERT_TRUE(ReadAll(**s).ok());
  const auto batches = backend.batches();
  ASSERT_EQ(batches.size(), 5u);
  EXPECT_EQ(SeedsIn(batches[1]), std::set<uint64_t>{30});
  EXPECT_EQ(SeedsIn(batches[2]), std::set<uint64_t>{20});
  // Equal priorities share batches round-robin.
  EXPECT_EQ(SeedsIn(batches[3]), (std::set<uint64_t>{10, 40}));
  EXPECT_EQ(SeedsIn(batches[4]), (std::set<uint64_t>{10, 40}));
}

TEST(DynamicBatcherTest, OnePriorityLevelMakesEveryRequestEqual) {
  FakeBackend backend;
  BatcherOptions o = Options(2, absl::ZeroDuration());
  DynamicBatcher batcher(o, &backend, nullptr);
  backend.CloseGate();
  auto first = *batcher.Submit(Plan(1, 2), absl::InfiniteFuture());
  ASSERT_TRUE(backend.WaitStarted(1, absl::Seconds(5)));
  auto low = *batcher.Submit(Plan(10, 1), absl::InfiniteFuture(), 0);
  auto high = *batcher.Submit(Plan(30, 1), absl::InfiniteFuture(), 5);
  backend.OpenGate();
  for (auto* s : {&first, &low, &high}) ASSERT_TRUE(ReadAll(**s).ok());
  const auto batches = backend.batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(SeedsIn(batches[1]), (std::set<uint64_t>{10, 30}));
}

TEST(DynamicBatcherTest, BackpressureBoundsShowersHeldForASlowReader) {
  FakeBackend backend;
  BatcherOptions o = Options(8, absl::ZeroDuration());
  o.buffered_chunks = 4;
  DynamicBatcher batcher(o, &backend, nullptr);
  const int chunk = 16;
  const int64_t capacity = std::max(4 * chunk, 2 * o.max_batch_size);  // 64
  auto stream = *batcher.Submit(Plan(5, 10000, chunk), absl::InfiniteFuture());
  // Nobody reads: production stops at the request's capacity.
  for (int i = 0; i < 100 && backend.showers_run() < capacity; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(backend.showers_run(), capacity);
  int64_t read = 0;
  int64_t worst = 0;
  while (true) {
    DynamicBatcher::Chunk c;
    absl::StatusOr<Poll> p = stream->Next(absl::Seconds(5), &c);
    ASSERT_TRUE(p.ok()) << p.status();
    if (*p == Poll::kDone) break;
    ASSERT_EQ(*p, Poll::kChunk);
    ASSERT_EQ(c.offset, read);
    read += c.count;
    worst = std::max(worst, backend.showers_run() - read);
  }
  EXPECT_EQ(read, 10000);
  EXPECT_LE(worst, capacity);
}

TEST(DynamicBatcherTest, ChunksCarryTheRequestsShowersInOrder) {
  FakeBackend backend;
  BatcherOptions o = Options(16, absl::Milliseconds(5));
  DynamicBatcher batcher(o, &backend, nullptr);
  auto a = *batcher.Submit(Plan(3, 50, 20, 42), absl::InfiniteFuture());
  auto b = *batcher.Submit(Plan(4, 7, 0, 250), absl::InfiniteFuture());
  auto ca = ReadAll(*a);
  auto cb = ReadAll(*b);
  ASSERT_TRUE(ca.ok() && cb.ok());
  ASSERT_EQ(ca->size(), 3u);  // 20 + 20 + 10
  EXPECT_EQ((*ca)[2].count, 10);
  int64_t index = 0;
  for (const auto& c : *ca) {
    ASSERT_EQ(c.offset, index);
    ASSERT_EQ(c.cells.size(), static_cast<size_t>(c.count * FakeBackend::kCells));
    for (int64_t i = 0; i < c.count; ++i, ++index) {
      const ShowerSpec& s = c.showers[i];
      EXPECT_EQ(s.index, index);
      EXPECT_EQ(s.seed, 3u);
      EXPECT_FLOAT_EQ(s.energy_gev, 42.0f);
      for (int64_t k = 0; k < FakeBackend::kCells; ++k) {
        ASSERT_EQ(c.cells[i * FakeBackend::kCells + k], FakeBackend::Cell(s, k));
      }
    }
  }
  ASSERT_EQ(cb->size(), 1u);
  EXPECT_EQ((*cb)[0].count, 7);
  EXPECT_FLOAT_EQ((*cb)[0].showers[6].energy_gev, 250.0f);
}

TEST(DynamicBatcherTest, BackendFailureEndsTheRequestsOfThatBatch) {
  FakeBackend backend;
  backend.set_fail(true);
  BatcherOptions o;
  o.max_queue_delay = absl::ZeroDuration();
  DynamicBatcher batcher(o, &backend, nullptr);
  auto s = *batcher.Submit(Plan(1, 3), absl::InfiniteFuture());
  auto r = ReadAll(*s);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("fake backend failure"), std::string::npos);
  EXPECT_EQ(batcher.stats().queued_showers, 0);
  EXPECT_EQ(batcher.stats().active_requests, 0);
}

TEST(DynamicBatcherTest, SharedComputeSlotRunsOneBatchAtATime) {
  FakeBackend slow_a, slow_b;
  slow_a.set_delay(absl::Milliseconds(100));
  slow_b.set_delay(absl::Milliseconds(100));
  auto slot = std::make_shared<absl::Mutex>();
  BatcherOptions o;
  o.max_queue_delay = absl::ZeroDuration();
  DynamicBatcher a(o, &slow_a, slot), b(o, &slow_b, slot);
  const absl::Time start = absl::Now();
  auto sa = *a.Submit(Plan(1, 1), absl::InfiniteFuture());
  auto sb = *b.Submit(Plan(2, 1), absl::InfiniteFuture());
  ASSERT_TRUE(ReadAll(*sa).ok());
  ASSERT_TRUE(ReadAll(*sb).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));  // serialised, not overlapped
}

}  // namespace
}  // namespace gantry::serving
