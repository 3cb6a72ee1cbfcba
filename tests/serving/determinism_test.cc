// Determinism of served showers with the real (untrained) generator: the same request batched the
// same way gives bit-identical showers; batched alone, merged with other requests, or as a lone
// shower it agrees within kBatchingTolerance (bit for bit on AVX-512 CPUs, not on AVX2-only ones,
// whose oneDNN kernels round larger batches differently); different seeds differ.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "tests/serving/shower_compare.h"
#include "tests/serving/torch_model.h"
#include "tests/support/temp_dir.h"
#include "workers/serving/dynamic_batcher.h"

namespace gantry::serving {
namespace {

namespace v1 = ::gantry::v1;
using Poll = DynamicBatcher::Stream::Poll;

// Documented in docs/BENCHMARKS.md ("Generation serving"): a cell may differ by this much
// relative to the largest cell of its shower when the shower ran in a batch of another size.
constexpr double kBatchingTolerance = 1e-4;

class DeterminismTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new gantry::testing::TempDir();
    model_ = new testing::TorchModelFile(
        testing::WriteTorchModel("3dgan-25", 11, dir_->File("m25.ckpt")));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete dir_;
  }
  void SetUp() override {
    auto b = TorchBackend::FromCheckpoint(model_->path);
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
  }

  static GenerationPlan Plan(uint64_t seed, int64_t count) {
    v1::WorkerGenerateRequest r;
    r.mutable_model()->set_model_ref("m:1");
    auto* range = r.mutable_request()->mutable_range();
    range->mutable_energy_gev()->set_min(10);
    range->mutable_energy_gev()->set_max(500);
    range->set_count(count);
    r.mutable_request()->set_seed(seed);
    r.mutable_request()->set_chunk_showers(8);
    return *GenerationPlan::Create(r, ModelTraits{});
  }

  static std::vector<float> ReadAll(DynamicBatcher::Stream& s) {
    std::vector<float> cells;
    while (true) {
      DynamicBatcher::Chunk c;
      absl::StatusOr<Poll> p = s.Next(absl::Seconds(60), &c);
      EXPECT_TRUE(p.ok()) << p.status();
      if (!p.ok() || *p == Poll::kDone) return cells;
      cells.insert(cells.end(), c.cells.begin(), c.cells.end());
    }
  }

  // Largest |a - b| relative to the largest cell of the shower, over all showers.
  static double WorstRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    return testing::WorstRelativeDifference(a, b);
  }

  static gantry::testing::TempDir* dir_;
  static testing::TorchModelFile* model_;
  std::unique_ptr<TorchBackend> backend_;
};

gantry::testing::TempDir* DeterminismTest::dir_ = nullptr;
testing::TorchModelFile* DeterminismTest::model_ = nullptr;

TEST_F(DeterminismTest, SameRequestTwiceIsBitIdentical) {
  BatcherOptions o;
  o.max_batch_size = 16;
  o.max_queue_delay = absl::ZeroDuration();
  DynamicBatcher batcher(o, backend_.get(), nullptr);
  auto first = ReadAll(**batcher.Submit(Plan(42, 20), absl::InfiniteFuture()));
  auto second = ReadAll(**batcher.Submit(Plan(42, 20), absl::InfiniteFuture()));
  ASSERT_EQ(first.size(), 20u * 25 * 25 * 25);
  double sum = 0;
  for (float v : first) sum += v;
  ASSERT_GT(sum, 0) << "the untrained generator produced empty showers; nothing is tested";
  EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * sizeof(float)));
}

TEST_F(DeterminismTest, OtherBatchingGivesTheSameShowersWithinTolerance) {
  BatcherOptions o;
  o.max_batch_size = 16;
  o.max_queue_delay = absl::Milliseconds(50);
  std::vector<float> alone, merged;
  {
    DynamicBatcher batcher(o, backend_.get(), nullptr);
    alone = ReadAll(**batcher.Submit(Plan(42, 20), absl::InfiniteFuture()));  // 16 + 4
  }
  {
    DynamicBatcher batcher(o, backend_.get(), nullptr);
    auto other = *batcher.Submit(Plan(7, 13), absl::InfiniteFuture());
    auto mine = *batcher.Submit(Plan(42, 20), absl::InfiniteFuture());
    std::thread drain([&] { ReadAll(*other); });
    merged = ReadAll(*mine);  // interleaved with the other request in batches of 16
    drain.join();
  }
  // Shower by shower against a batch of one.
  std::vector<float> single(25 * 25 * 25);
  ASSERT_TRUE(backend_->RunBatch({Plan(42, 20).Shower(19)}, single.data()).ok());
  const std::vector<float> last(alone.end() - single.size(), alone.end());
  const double vs_single = WorstRelativeDifference(last, single);
  const double vs_merged = WorstRelativeDifference(alone, merged);
  std::cout << "worst relative difference: merged " << vs_merged << ", batch of one " << vs_single
            << "\n";
  EXPECT_LE(vs_merged, kBatchingTolerance);
  EXPECT_LE(vs_single, kBatchingTolerance);
  // Any batch size, with the shower anywhere in it.
  for (int n : {2, 3, 17, 64}) {
    const GenerationPlan plan = Plan(42, 20);
    std::vector<ShowerSpec> specs;
    for (int i = 0; i < n; ++i) specs.push_back(Plan(5, 64).Shower(i));
    specs[n / 2] = plan.Shower(19);
    std::vector<float> out(n * single.size());
    ASSERT_TRUE(backend_->RunBatch(specs, out.data()).ok());
    const std::vector<float> placed(out.begin() + (n / 2) * single.size(),
                                    out.begin() + (n / 2 + 1) * single.size());
    EXPECT_LE(WorstRelativeDifference(placed, single), kBatchingTolerance)
        << "shower 19 at position " << n / 2 << " of a batch of " << n;
  }
}

TEST_F(DeterminismTest, DifferentSeedsGiveDifferentShowers) {
  BatcherOptions o;
  o.max_queue_delay = absl::ZeroDuration();
  DynamicBatcher batcher(o, backend_.get(), nullptr);
  auto a = ReadAll(**batcher.Submit(Plan(1, 4), absl::InfiniteFuture()));
  auto b = ReadAll(**batcher.Submit(Plan(2, 4), absl::InfiniteFuture()));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_GT(WorstRelativeDifference(a, b), 0.05);
  // And the showers of one request differ from each other.
  const size_t cells = 25 * 25 * 25;
  EXPECT_NE(0, std::memcmp(a.data(), a.data() + cells, cells * sizeof(float)));
}

}  // namespace
}  // namespace gantry::serving
