// TrainingProgress: the training loop's accounting (progress, ETA, data stall, epoch losses).
#include "workers/runner/training_progress.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gantry::runner {
namespace {

StepFigures Step(double d, double g, double seconds, double wait) {
  // total, adversarial, energy, ecal; the generator also has a profile loss.
  return {{d, d / 2, 0.1, 0.2}, {d + 1, 0.5, 0.1, 0.2}, {g, g / 2, 0.3, 0.4, 0.05}, seconds, wait};
}

TEST(TrainingProgressTest, MidEpochStepsReportTheirOwnLossesAndTheRunsRates) {
  // 2 epochs of 4 steps, resumed after 2 steps, global batch 32.
  TrainingProgress meter(/*variable_angle=*/false, 2, 4, /*start_step=*/2, 32);
  const TrainingProgress::Update u = meter.OnStep(Step(1.0, 3.0, 0.5, 0.1), 0, 3, false, 0.5);
  EXPECT_TRUE(u.epoch_line.empty());
  EXPECT_EQ(u.progress.epoch(), 1);
  EXPECT_EQ(u.progress.epochs(), 2);
  EXPECT_EQ(u.progress.step(), 3);
  EXPECT_EQ(u.progress.steps_per_epoch(), 4);
  // 1 step in 0.5 s since the resume: 2 steps/s, 64 samples/s, 5 steps left: 2.5 s.
  EXPECT_DOUBLE_EQ(u.progress.samples_per_second(), 64);
  EXPECT_DOUBLE_EQ(u.progress.eta_seconds(), 2.5);
  EXPECT_DOUBLE_EQ(u.progress.data_stall_fraction(), 0.2);
  const auto& l = u.progress.losses();
  EXPECT_DOUBLE_EQ(l.at("d_real"), 1.0);
  EXPECT_DOUBLE_EQ(l.at("d_fake"), 2.0);
  EXPECT_DOUBLE_EQ(l.at("d_loss"), 1.5);
  EXPECT_DOUBLE_EQ(l.at("d_adversarial"), 0.5);
  EXPECT_DOUBLE_EQ(l.at("g_loss"), 3.0);
  EXPECT_DOUBLE_EQ(l.at("g_ecal"), 0.4);
  EXPECT_DOUBLE_EQ(l.at("g_profile"), 0.05);
  EXPECT_EQ(l.count("d_angle"), 0u);
}

TEST(TrainingProgressTest, AnEpochsLastStepReportsTheEpochMeansAndALine) {
  TrainingProgress meter(false, 3, 2, 0, 8);
  meter.OnStep(Step(1.0, 2.0, 1.0, 0.0), 0, 1, false, 1.0);
  const TrainingProgress::Update end = meter.OnStep(Step(3.0, 4.0, 1.0, 0.5), 0, 2, true, 2.5);
  EXPECT_DOUBLE_EQ(end.progress.losses().at("d_real"), 2.0);  // mean of 1 and 3
  EXPECT_DOUBLE_EQ(end.progress.losses().at("g_loss"), 3.0);
  EXPECT_DOUBLE_EQ(end.progress.losses().at("d_loss"), 2.5);
  EXPECT_TRUE(absl::StartsWith(end.epoch_line,
                               "epoch 1/3 done: d_loss 2.5000 g_loss 3.0000, 2 steps in 2.5 s"))
      << end.epoch_line;
  EXPECT_TRUE(absl::StrContains(end.epoch_line, "data stall 25.0% (0.50 s waiting for batches)"))
      << end.epoch_line;
  // The next epoch starts its sums and its clock afresh; the run's stall keeps counting.
  const TrainingProgress::Update next = meter.OnStep(Step(5.0, 6.0, 1.0, 1.0), 1, 3, false, 3.0);
  EXPECT_DOUBLE_EQ(next.progress.losses().at("d_real"), 5.0);
  EXPECT_NEAR(meter.data_stall_fraction(), 1.5 / 3.0, 1e-12);
  const TrainingProgress::Update end2 = meter.OnStep(Step(7.0, 8.0, 1.0, 0.0), 1, 4, true, 4.0);
  EXPECT_DOUBLE_EQ(end2.progress.losses().at("d_real"), 6.0);
  EXPECT_TRUE(absl::StrContains(end2.epoch_line,
                                "epoch 2/3 done: d_loss 6.5000 g_loss 7.0000, 2 steps in 1.5 s"))
      << end2.epoch_line;
}

TEST(TrainingProgressTest, VariableAngleModelsNameTheAngleLoss) {
  google::protobuf::Map<std::string, double> losses;
  TrainingProgress::FillLosses(true, {1, 0.1, 0.2, 0.3, 0.4}, {3, 0.3, 0.4, 0.5, 0.6},
                               {2, 0.5, 0.6, 0.7, 0.8}, &losses);
  EXPECT_DOUBLE_EQ(losses.at("d_angle"), 0.4);  // mean of 0.3 and 0.5
  EXPECT_DOUBLE_EQ(losses.at("g_angle"), 0.7);
  EXPECT_DOUBLE_EQ(losses.at("g_ecal"), 0.8);
  EXPECT_EQ(losses.count("g_profile"), 0u);  // no extra entry: no profile loss
}

TEST(TrainingProgressTest, RanksThatDoNotReportStillAccountTheirStall) {
  TrainingProgress meter(false, 2, 2, 0, 8);
  const TrainingProgress::Update u =
      meter.OnStep(Step(1, 1, 1.0, 0.5), 0, 1, false, 1.0, /*report=*/false);
  EXPECT_EQ(u.progress.step(), 0);
  EXPECT_TRUE(u.progress.losses().empty());
  EXPECT_TRUE(meter.OnStep(Step(3, 3, 1.0, 0.0), 0, 2, true, 2.0, false).epoch_line.empty());
  EXPECT_DOUBLE_EQ(meter.data_stall_fraction(), 0.25);
  // The epoch's sums were reset at its end even without a report.
  const TrainingProgress::Update next = meter.OnStep(Step(5, 5, 1.0, 0.0), 1, 3, true, 3.0);
  EXPECT_DOUBLE_EQ(next.progress.losses().at("d_real"), 5.0);  // not (1 + 3 + 5) / 3
  EXPECT_TRUE(absl::StrContains(next.epoch_line, "1 steps in 1.0 s")) << next.epoch_line;
}

TEST(TrainingProgressTest, NothingDoneYetMeansNoRateAndNoStall) {
  TrainingProgress meter(false, 1, 10, 0, 16);
  EXPECT_EQ(meter.data_stall_fraction(), 0);
  const TrainingProgress::Update u = meter.OnStep(Step(1, 1, 0, 0), 0, 1, false, 0);
  EXPECT_EQ(u.progress.samples_per_second(), 0);
  EXPECT_EQ(u.progress.eta_seconds(), 0);
  EXPECT_EQ(u.progress.data_stall_fraction(), 0);
}

}  // namespace
}  // namespace gantry::runner
