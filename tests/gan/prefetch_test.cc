// Tests of the trainer's batch sources: the prefetching file-backed source yields exactly the
// in-memory source's batches (and the same training, bit for bit), slow reads are hidden behind
// the step by prefetch and exposed without it, the queue stays within its depth, and errors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "showers/hdf5_io.h"
#include "showers/shower_file_reader.h"
#include "showers/toy_mc.h"
#include "tests/gan/test_data.h"
#include "workers/gan/in_memory_batch_source.h"
#include "workers/gan/prefetching_batch_source.h"
#include "workers/gan/trainer.h"

namespace gantry::gan {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Weights;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

ModelConfig Tiny() { return *PresetConfig("tiny"); }

// A scaled-down 3dgan-51 (cells^0.85, angles), as in training_test.
ModelConfig SmallVariableAngle() {
  ModelConfig config = *PresetConfig("3dgan-51");
  config.latent = 8;
  config.dense_channels = 2;
  config.generator_filters = {2, 2, 2, 2, 2, 2};
  config.discriminator_filters = {2, 2, 2, 2};
  return config;
}

std::string TempPath(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("gantry-prefetch-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

class PrefetchTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    std::error_code ignored;
    std::filesystem::remove_all(std::filesystem::path(TempPath("x")).parent_path(), ignored);
  }
};

// `events` fixed-angle toy MC showers with an empty shower (dropped by the event selection) at
// position 4 when events > 4.
showers::ShowerSet FixedAngleWithEmptyEvent(int64_t events) {
  showers::ShowerSet set = testing::FixedAngleShowers(events, 17);
  if (events > 4) std::fill(set.mutable_event(4), set.mutable_event(5), 0.0f);
  return set;
}

showers::ShowerSet Subset(const showers::ShowerSet& set, const std::vector<int64_t>& indices) {
  showers::ShowerSet out;
  out.layout = set.layout;
  out.shape = set.shape;
  out.particle = set.particle;
  for (int64_t i : indices) {
    out.cells.insert(out.cells.end(), set.event(i), set.event(i) + set.cells_per_event());
    out.energy_gev.push_back(set.energy_gev[i]);
    if (!set.theta_rad.empty()) out.theta_rad.push_back(set.theta_rad[i]);
  }
  return out;
}

std::shared_ptr<const showers::ShowerFileReader> WriteAndOpen(const showers::ShowerSet& set,
                                                              const std::string& name) {
  const std::string path = TempPath(name);
  EXPECT_TRUE(showers::WriteShowerFile(path, set).ok());
  auto reader = showers::ShowerFileReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  return reader.ok() ? std::shared_ptr<const showers::ShowerFileReader>(std::move(*reader))
                     : nullptr;
}

std::vector<int64_t> Range(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

void ExpectSameBatch(const RealBatch& a, const RealBatch& b, const std::string& what) {
  EXPECT_TRUE(at::equal(a.images, b.images)) << what << ": images";
  EXPECT_TRUE(at::equal(a.energy100, b.energy100)) << what << ": energy";
  EXPECT_TRUE(at::equal(a.ecal, b.ecal)) << what << ": ecal";
  ASSERT_EQ(a.theta.defined(), b.theta.defined()) << what;
  if (a.theta.defined()) EXPECT_TRUE(at::equal(a.theta, b.theta)) << what << ": theta";
}

TEST_F(PrefetchTest, SourceYieldsTheInMemoryBatchesBitForBit) {
  for (const bool variable : {false, true}) {
    SCOPED_TRACE(variable ? "variable angle" : "fixed angle");
    ModelConfig config = variable ? SmallVariableAngle() : Tiny();
    config.min_event_sum_gev = 0.0;  // drop empty showers (3dgan-51's default; 25^3 keeps all)
    showers::ShowerSet set;
    if (variable) {
      showers::ToyMcConfig mc;
      mc.layout = showers::Layout::kVariableAngle3DGan;
      mc.events = 9;
      mc.energy_min_gev = 50;
      mc.threads = 2;
      set = *showers::SimulateToyMc(mc);
      std::fill(set.mutable_event(4), set.mutable_event(5), 0.0f);
    } else {
      set = FixedAngleWithEmptyEvent(9);
    }
    // Training candidates as a hold-out split leaves them: ascending, some events missing.
    const std::vector<int64_t> candidates = {0, 1, 3, 4, 5, 7, 8};
    auto memory_tensors = PreprocessShowers(config, Subset(set, candidates));
    ASSERT_TRUE(memory_tensors.ok()) << memory_tensors.status();
    EXPECT_EQ(memory_tensors->dropped_events, 1);
    InMemoryBatchSource memory(*std::move(memory_tensors));

    auto reader = WriteAndOpen(set, variable ? "EleVariable.h5" : "EleFixed.h5");
    ASSERT_NE(reader, nullptr);
    PrefetchOptions options;
    options.queue_depth = 2;
    options.loader_threads = 2;
    auto file = PrefetchingBatchSource::Create(config, reader, candidates, options);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ((*file)->events(), 6);
    EXPECT_EQ((*file)->dropped_events(), 1);
    EXPECT_EQ(memory.events(), 6);
    EXPECT_EQ((*file)->file_index(3), 5);  // candidates 0, 1, 3, [4 dropped], 5

    const std::vector<std::vector<int64_t>> plan = {{3, 1, 5}, {0, 2}, {4, 4, 0}, {5}};
    for (int round = 0; round < 2; ++round) {  // a second Plan() replaces the first
      ASSERT_TRUE(memory.Plan(plan).ok());
      ASSERT_TRUE((*file)->Plan(plan).ok());
      for (size_t k = 0; k < plan.size(); ++k) {
        absl::StatusOr<RealBatch> a = memory.Next(), b = (*file)->Next();
        ASSERT_TRUE(a.ok()) << a.status();
        ASSERT_TRUE(b.ok()) << b.status();
        ExpectSameBatch(*a, *b, "batch " + std::to_string(k));
      }
      EXPECT_EQ((*file)->Next().status().code(), absl::StatusCode::kFailedPrecondition);
    }
  }
}

TrainerOptions SmallRun(uint64_t seed) {
  TrainerOptions o;
  o.batch_size = 2;
  o.max_steps_per_epoch = 3;
  o.epochs = 3;  // the eager next-epoch permutation is drawn twice
  o.seed = seed;
  o.threads = 1;
  return o;
}

TEST_F(PrefetchTest, TrainerOnThePrefetchingSourceMatchesTheInMemoryTrainerBitForBit) {
  ModelConfig config = Tiny();
  config.min_event_sum_gev = 0.0;  // the empty shower is dropped by both sources
  const showers::ShowerSet set = FixedAngleWithEmptyEvent(12);
  const std::vector<int64_t> candidates = {0, 1, 2, 4, 5, 6, 8, 9, 10, 11};  // 3, 7 held out
  auto memory = Trainer::Create(config, Subset(set, candidates), SmallRun(5));
  ASSERT_TRUE(memory.ok()) << memory.status();
  PrefetchOptions options;
  options.queue_depth = 3;
  options.loader_threads = 2;
  auto source =
      PrefetchingBatchSource::Create(config, WriteAndOpen(set, "EleTrain.h5"), candidates, options);
  ASSERT_TRUE(source.ok()) << source.status();
  auto file = Trainer::CreateWithSource(config, *std::move(source), SmallRun(5));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->events(), 9);
  EXPECT_EQ((*file)->steps_per_epoch(), 3);
  for (int step = 0; step < 8; ++step) {  // crosses two epoch boundaries
    absl::StatusOr<StepReport> a = (*memory)->Step();
    absl::StatusOr<StepReport> b = (*file)->Step();
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->discriminator_real_loss, b->discriminator_real_loss) << "step " << step;
    EXPECT_EQ(a->discriminator_fake_loss, b->discriminator_fake_loss) << "step " << step;
    EXPECT_EQ(a->generator_loss, b->generator_loss) << "step " << step;
    EXPECT_GE(b->data_wait_seconds, 0.0);
    EXPECT_LE(b->data_stall_fraction, 1.0);
  }
  EXPECT_EQ((*file)->state().epoch, 2);
  const auto wa = Weights((*memory)->state()), wb = Weights((*file)->state());
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) EXPECT_TRUE(at::equal(wa[i], wb[i])) << "tensor " << i;
}

// A source that records the plans a Trainer hands it (over in-memory tensors).
class RecordingSource : public BatchSource {
 public:
  explicit RecordingSource(TrainingTensors data, std::vector<std::vector<int64_t>>* seen)
      : inner_(std::move(data)), seen_(seen) {}
  int64_t events() const override { return inner_.events(); }
  at::ScalarType dtype() const override { return inner_.dtype(); }
  absl::Status Plan(std::vector<std::vector<int64_t>> batches) override {
    seen_->insert(seen_->end(), batches.begin(), batches.end());
    return inner_.Plan(std::move(batches));
  }
  absl::StatusOr<RealBatch> Next() override { return inner_.Next(); }

 private:
  InMemoryBatchSource inner_;
  std::vector<std::vector<int64_t>>* seen_;
};

TEST_F(PrefetchTest, DataParallelRanksPlanDisjointSlicesOfOneEpochPermutation) {
  const ModelConfig config = Tiny();
  const showers::ShowerSet set = testing::FixedAngleShowers(8, 3);
  std::vector<std::vector<int64_t>> plans[2];
  for (int rank = 0; rank < 2; ++rank) {
    TrainerOptions o = SmallRun(9);
    o.world_size = 2;
    o.rank = rank;
    o.epochs = 1;
    o.max_steps_per_epoch = 0;
    auto tensors = PreprocessShowers(config, set);
    ASSERT_TRUE(tensors.ok());
    auto trainer = Trainer::CreateWithSource(
        config, std::make_unique<RecordingSource>(*std::move(tensors), &plans[rank]), o);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    EXPECT_EQ((*trainer)->steps_per_epoch(), 2);  // 8 events / (2 ranks x 2)
    ASSERT_TRUE((*trainer)->Step().ok());
  }
  ASSERT_EQ(plans[0].size(), 2u);
  ASSERT_EQ(plans[1].size(), 2u);
  std::vector<int64_t> all;
  for (const auto& p : plans)
    for (const auto& b : p) {
      EXPECT_EQ(b.size(), 2u);
      all.insert(all.end(), b.begin(), b.end());
    }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, Range(8));  // one permutation, every event exactly once across the ranks
}

// The pure pipeline: reads made slow by a hook (read_delay) against a fake step that sleeps
// `step_delay`; returns the data-stall fraction the consumer saw over `steps` batches.
double PipelineStall(int queue_depth, int loaders, std::chrono::milliseconds read_delay,
                     std::chrono::milliseconds step_delay, int steps, int* max_in_flight) {
  const ModelConfig config = Tiny();
  static const std::shared_ptr<const showers::ShowerFileReader> reader =
      WriteAndOpen(testing::FixedAngleShowers(16, 4), "ElePipeline.h5");
  std::atomic<int> started{0};
  PrefetchOptions options;
  options.queue_depth = queue_depth;
  options.loader_threads = loaders;
  options.before_read = [&] {
    started.fetch_add(1);
    std::this_thread::sleep_for(read_delay);
  };
  auto source = PrefetchingBatchSource::Create(config, reader, Range(16), options);
  EXPECT_TRUE(source.ok()) << source.status();
  if (!source.ok()) return -1;
  std::vector<std::vector<int64_t>> plan;
  for (int s = 0; s < steps; ++s) plan.push_back({(s * 3) % 16, (s * 5 + 1) % 16});
  EXPECT_TRUE((*source)->Plan(plan).ok());
  double wait = 0, total = 0;
  *max_in_flight = 0;
  for (int s = 0; s < steps; ++s) {
    const auto step_start = Clock::now();
    absl::StatusOr<RealBatch> batch = (*source)->Next();
    wait += Since(step_start);
    EXPECT_TRUE(batch.ok()) << batch.status();
    std::this_thread::sleep_for(step_delay);  // the "computation"
    total += Since(step_start);
    // Reads started but not yet consumed: never more than the queue depth.
    *max_in_flight = std::max(*max_in_flight, started.load() - (s + 1));
  }
  return wait / total;
}

TEST_F(PrefetchTest, SlowReadsAreHiddenByPrefetchAndExposedWithout) {
  using std::chrono::milliseconds;
  int in_flight = 0;
  // Reads take 60 ms, steps 120 ms: reading inline stalls ~1/3 of every step; with a queue of 4
  // and 2 loaders only the first batch is waited for (~60 ms of ~2 s).
  const double without = PipelineStall(0, 0, milliseconds(60), milliseconds(120), 16, &in_flight);
  EXPECT_LE(in_flight, 0);
  const double with = PipelineStall(4, 2, milliseconds(60), milliseconds(120), 16, &in_flight);
  EXPECT_LE(in_flight, 4);
  EXPECT_GE(in_flight, 1);
  std::cerr << "data-stall fraction without prefetch " << without << ", with " << with << "\n";
  EXPECT_GT(without, 0.25);
  EXPECT_LT(with, 0.10);
  EXPECT_LT(with, without / 3);
}

TEST_F(PrefetchTest, QueueNeverHoldsMoreThanItsDepth) {
  int in_flight = 0;
  // Fast reads, slow consumer: the loaders run ahead until the queue is full, and stop there.
  PipelineStall(2, 2, std::chrono::milliseconds(1), std::chrono::milliseconds(30), 12, &in_flight);
  EXPECT_EQ(in_flight, 2);
}

TEST_F(PrefetchTest, SlowSourceIsHiddenByPrefetchInARealTrainer) {
  const ModelConfig config = Tiny();
  const showers::ShowerSet set = testing::FixedAngleShowers(24, 6);
  auto reader = WriteAndOpen(set, "EleTrainer.h5");
  ASSERT_NE(reader, nullptr);
  TrainerOptions o = SmallRun(3);
  o.max_steps_per_epoch = 7;
  o.epochs = 2;
  // The step time of this machine right now, from a trainer on in-memory data.
  double step_seconds = 0;
  {
    auto probe = Trainer::Create(config, set, o);
    ASSERT_TRUE(probe.ok()) << probe.status();
    std::vector<double> times;
    for (int i = 0; i < 3; ++i) {
      auto r = (*probe)->Step();
      ASSERT_TRUE(r.ok()) << r.status();
      times.push_back(r->seconds);
    }
    std::sort(times.begin(), times.end());
    step_seconds = times[1];
  }
  // Each batch read sleeps 0.4 steps (at least 30 ms).
  const auto delay = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::duration<double>(std::max(0.03, 0.4 * step_seconds)));
  auto run = [&](int depth, int loaders) -> double {
    PrefetchOptions options;
    options.queue_depth = depth;
    options.loader_threads = loaders;
    options.before_read = [delay] { std::this_thread::sleep_for(delay); };
    auto source = PrefetchingBatchSource::Create(config, reader, Range(24), options);
    EXPECT_TRUE(source.ok()) << source.status();
    if (!source.ok()) return -1;
    auto trainer = Trainer::CreateWithSource(config, *std::move(source), o);
    EXPECT_TRUE(trainer.ok()) << trainer.status();
    if (!trainer.ok()) return -1;
    std::vector<EpochReport> epochs;
    (*trainer)->set_epoch_callback([&](const EpochReport& r) { epochs.push_back(r); });
    EXPECT_TRUE((*trainer)->Train().ok());
    EXPECT_EQ(epochs.size(), 2u);
    double wait = 0, seconds = 0;
    for (const EpochReport& e : epochs) {
      EXPECT_NEAR(e.data_stall_fraction, e.data_wait_seconds / e.seconds, 1e-9);
      wait += e.data_wait_seconds;
      seconds += e.seconds;
    }
    return wait / seconds;
  };
  const double without = run(0, 0);
  const double with = run(4, 2);
  std::cerr << "step " << step_seconds << " s, read delay " << delay.count() / 1e3
            << " ms: data-stall fraction without prefetch " << without << ", with " << with << "\n";
  // Inline reads: ~delay / (delay + step) = 0.29. Prefetched: a read at the start of each epoch
  // (the next epoch's order is known only when an epoch ends), ~2 x 0.4 / 14 = 0.06 at most.
  EXPECT_GT(without, 0.15);
  EXPECT_LT(with, 0.12);
  EXPECT_LT(with, without / 3);
}

TEST_F(PrefetchTest, ErrorsNameTheProblem) {
  const ModelConfig config = Tiny();
  showers::ShowerSet set = testing::FixedAngleShowers(6, 2);
  auto reader = WriteAndOpen(set, "EleErrors.h5");
  ASSERT_NE(reader, nullptr);
  PrefetchOptions bad;
  bad.queue_depth = 2;
  bad.loader_threads = 0;
  EXPECT_EQ(PrefetchingBatchSource::Create(config, reader, Range(6), bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PrefetchingBatchSource::Create(config, reader, {0, 6}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A variable-angle model cannot train on 25^3 data.
  auto wrong = PrefetchingBatchSource::Create(SmallVariableAngle(), reader, Range(6), {});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("does not fit"), std::string::npos) << wrong.status();

  auto source = PrefetchingBatchSource::Create(config, reader, Range(6), {});
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->Next().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*source)->Plan({{0, 6}}).code(), absl::StatusCode::kInvalidArgument);

  // A NaN cell: found when its batch is read (the Trainer's step fails with that status) ...
  set.mutable_event(2)[5] = std::nanf("");
  auto nan_reader = WriteAndOpen(set, "EleNaN.h5");
  ASSERT_NE(nan_reader, nullptr);
  auto lazy = PrefetchingBatchSource::Create(config, nan_reader, Range(6), {});
  ASSERT_TRUE(lazy.ok()) << lazy.status();
  ASSERT_TRUE((*lazy)->Plan({{0, 1}, {3, 2}}).ok());
  EXPECT_TRUE((*lazy)->Next().ok());
  absl::StatusOr<RealBatch> second = (*lazy)->Next();
  EXPECT_EQ(second.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(second.status().message().find("event 2"), std::string::npos) << second.status();
  // ... or already by the selection pass at creation when the config selects events.
  ModelConfig selecting = config;
  selecting.min_event_sum_gev = 0.0;
  auto nan = PrefetchingBatchSource::Create(selecting, nan_reader, Range(6), {});
  EXPECT_EQ(nan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nan.status().message().find("event 2"), std::string::npos) << nan.status();
}

}  // namespace
}  // namespace gantry::gan
