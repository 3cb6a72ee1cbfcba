// A restarted rank continues bit for bit: training N steps through the rank's input path (the
// prefetching source over an HDF5 file) equals training k steps, writing a checkpoint, building a
// fresh trainer from the file with runner::ResumeTrainer and training to N: every parameter,
// buffer and optimiser tensor of both networks, the counters and the epoch's order. A checkpoint
// of another model or seed is refused, and the comparison itself sees a one-bit change.
#include "workers/runner/resume.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "showers/hdf5_io.h"
#include "showers/shower_file_reader.h"
#include "tests/gan/test_data.h"
#include "tests/support/temp_dir.h"
#include "workers/app/local_commands.h"
#include "workers/gan/checkpoint_diff.h"
#include "workers/gan/prefetching_batch_source.h"

namespace gantry::runner {
namespace {

class ResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = dir_.File("Ele_train.h5");
    ASSERT_TRUE(showers::WriteShowerFile(file_, gan::testing::FixedAngleShowers(14, 3)).ok());
    absl::StatusOr<std::shared_ptr<const showers::ShowerFileReader>> reader =
        showers::ShowerFileReader::Open(file_);
    ASSERT_TRUE(reader.ok()) << reader.status();
    reader_ = *reader;
    options_.batch_size = 2;
    options_.seed = 11;
    options_.epochs = 3;
    options_.threads = 1;
  }

  // The rank's input pipeline: every event of the file, read ahead by a loader thread.
  std::unique_ptr<gan::BatchSource> Source() {
    std::vector<int64_t> events(static_cast<size_t>(reader_->events()));
    std::iota(events.begin(), events.end(), 0);
    gan::PrefetchOptions prefetch;
    prefetch.queue_depth = 4;
    prefetch.loader_threads = 1;
    auto source = gan::PrefetchingBatchSource::Create(model_, reader_, events, prefetch);
    EXPECT_TRUE(source.ok()) << source.status();
    return source.ok() ? std::unique_ptr<gan::BatchSource>(*std::move(source)) : nullptr;
  }

  std::unique_ptr<gan::Trainer> Fresh() {
    auto trainer = gan::Trainer::CreateWithSource(model_, Source(), options_);
    EXPECT_TRUE(trainer.ok()) << trainer.status();
    return trainer.ok() ? *std::move(trainer) : nullptr;
  }

  static void Steps(gan::Trainer& trainer, int n) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(trainer.Step().ok()) << "step " << i;
  }

  static std::string Describe(const std::vector<gan::TensorDifference>& diffs) {
    std::ostringstream out;
    for (const gan::TensorDifference& d : diffs) {
      if (!d.identical) out << d.name << " " << d.max_abs_difference << " " << d.problem << "\n";
    }
    return out.str();
  }

  gantry::testing::TempDir dir_;
  std::string file_;
  std::shared_ptr<const showers::ShowerFileReader> reader_;
  gan::ModelConfig model_ = *gan::PresetConfig("tiny");
  gan::TrainerOptions options_;
};

TEST_F(ResumeTest, ResumedTrainingIsBitIdenticalToUninterrupted) {
  auto straight = Fresh();
  ASSERT_NE(straight, nullptr);
  const int64_t per_epoch = straight->steps_per_epoch();
  ASSERT_GE(per_epoch, 3);
  const int total = static_cast<int>(2 * per_epoch + 1);  // into the third epoch
  Steps(*straight, total);

  // Interrupted mid-epoch and at an epoch's end.
  for (const int k : {static_cast<int>(per_epoch / 2), static_cast<int>(per_epoch)}) {
    SCOPED_TRACE(k);
    const std::string path = dir_.File("at-" + std::to_string(k) + ".ckpt");
    {
      auto first = Fresh();
      ASSERT_NE(first, nullptr);
      Steps(*first, k);
      ASSERT_TRUE(first->SaveCheckpoint(path).ok());
    }
    absl::StatusOr<std::unique_ptr<gan::Trainer>> resumed =
        ResumeTrainer(path, model_, Source(), options_);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    gan::Trainer& second = **resumed;
    EXPECT_EQ(second.state().step, k);
    Steps(second, total - k);

    EXPECT_EQ(second.state().step, straight->state().step);
    EXPECT_EQ(second.state().epoch, straight->state().epoch);
    EXPECT_EQ(second.state().epoch_cursor, straight->state().epoch_cursor);
    ASSERT_TRUE(second.state().permutation.defined());
    EXPECT_TRUE(at::equal(second.state().permutation, straight->state().permutation));
    EXPECT_TRUE(at::equal(second.state().rng.get_state(), straight->state().rng.get_state()));
    const std::vector<gan::TensorDifference> diffs =
        gan::CompareTrainingStates(straight->state(), second.state(), /*optimizers=*/true);
    EXPECT_TRUE(gan::AllIdentical(diffs)) << Describe(diffs);
    int optimizer_tensors = 0;
    for (const auto& d : diffs) optimizer_tensors += d.name.rfind("generator_optimizer.", 0) == 0;
    EXPECT_GT(optimizer_tensors, 0) << "the optimiser state was not compared";

    // The same through `gantry-worker checkpoint-diff` on the final checkpoints.
    const std::string a = dir_.File("straight.ckpt"), b = dir_.File("resumed.ckpt");
    ASSERT_TRUE(straight->SaveCheckpoint(a).ok());
    ASSERT_TRUE(second.SaveCheckpoint(b).ok());
    std::ostringstream out, err;
    EXPECT_EQ(app::RunCheckpointDiff(a, b, out, err), 0) << out.str() << err.str();
  }
}

TEST_F(ResumeTest, ACheckpointOfAnotherModelOrSeedIsRefused) {
  const std::string path = dir_.File("other.ckpt");
  {
    auto trainer = Fresh();
    ASSERT_NE(trainer, nullptr);
    Steps(*trainer, 1);
    ASSERT_TRUE(trainer->SaveCheckpoint(path).ok());
  }
  gan::ModelConfig other = model_;
  other.learning_rate *= 2;
  absl::StatusOr<std::unique_ptr<gan::Trainer>> refused =
      ResumeTrainer(path, other, Source(), options_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("model config differs"), std::string::npos)
      << refused.status();

  gan::ModelConfig bigger = *gan::PresetConfig("3dgan-25");
  refused = ResumeTrainer(path, bigger, Source(), options_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();

  gan::TrainerOptions reseeded = options_;
  reseeded.seed = 12;
  refused = ResumeTrainer(path, model_, Source(), reseeded);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("seed 11"), std::string::npos) << refused.status();

  refused = ResumeTrainer(dir_.File("missing.ckpt"), model_, Source(), options_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kNotFound) << refused.status();
}

TEST_F(ResumeTest, TheComparisonSeesOneChangedValue) {
  const std::string path = dir_.File("base.ckpt");
  auto trainer = Fresh();
  ASSERT_NE(trainer, nullptr);
  Steps(*trainer, 2);
  ASSERT_TRUE(trainer->SaveCheckpoint(path).ok());
  absl::StatusOr<gan::TrainingState> a = gan::ReadCheckpoint(path);
  absl::StatusOr<gan::TrainingState> b = gan::ReadCheckpoint(path);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(gan::AllIdentical(gan::CompareTrainingStates(*a, *b, true)));
  {
    torch::NoGradGuard no_grad;
    at::Tensor first = b->discriminator->parameters().front();
    first.view({-1})[0].add_(0.25);
  }
  const std::vector<gan::TensorDifference> diffs = gan::CompareTrainingStates(*a, *b, true);
  int differing = 0;
  for (const auto& d : diffs) {
    if (d.identical) continue;
    ++differing;
    EXPECT_EQ(d.name.rfind("discriminator.", 0), 0u) << d.name;
    EXPECT_NEAR(d.max_abs_difference, 0.25, 1e-6);
  }
  EXPECT_EQ(differing, 1);

  // checkpoint-diff: 1 when a parameter differs, 2 for a file that is not a checkpoint.
  const std::string changed = dir_.File("changed.ckpt");
  ASSERT_TRUE(gan::WriteCheckpoint(changed, *b).ok());
  std::ostringstream out, err;
  EXPECT_EQ(app::RunCheckpointDiff(path, changed, out, err), 1) << out.str();
  EXPECT_NE(out.str().find("1 of "), std::string::npos) << out.str();
  EXPECT_EQ(app::RunCheckpointDiff(path, file_, out, err), 2);
  EXPECT_NE(err.str().find(file_), std::string::npos) << err.str();
}

}  // namespace
}  // namespace gantry::runner
