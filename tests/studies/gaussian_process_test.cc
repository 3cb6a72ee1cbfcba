// The Gaussian process alone: it interpolates a smooth function, knows where it is unsure, takes
// noise into account, and refuses what it cannot fit; and the searches' seed mixing (RandomSource).
#include "studies/gaussian_process.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "studies/random_source.h"

namespace gantry::studies {
namespace {

double Smooth(double x, double y) { return std::sin(3 * x) + 0.5 * std::cos(5 * y); }

TEST(GaussianProcessTest, InterpolatesASmoothFunctionAndIsSureOnlyNearData) {
  RandomSource random(5);
  const int n = 40;
  Eigen::MatrixXd inputs(n, 2);
  Eigen::VectorXd targets(n);
  for (int i = 0; i < n; ++i) {
    inputs(i, 0) = random.Uniform();
    // The data cover only y < 0.5, so the model must be unsure at y = 1.
    inputs(i, 1) = 0.5 * random.Uniform();
    targets[i] = Smooth(inputs(i, 0), inputs(i, 1));
  }
  absl::StatusOr<GaussianProcess> process =
      GaussianProcess::Fit(inputs, targets, Eigen::VectorXd::Zero(n), 4, random);
  ASSERT_TRUE(process.ok()) << process.status();
  EXPECT_TRUE(std::isfinite(process->log_marginal_likelihood()));
  EXPECT_LT(process->noise_variance(), 1e-2);
  double worst_error = 0;
  for (int k = 0; k < 20; ++k) {
    Eigen::VectorXd point(2);
    point << random.Uniform(), 0.05 + 0.4 * random.Uniform();
    const GaussianProcess::Prediction prediction = process->Predict(point);
    worst_error = std::max(worst_error, std::abs(prediction.mean - Smooth(point[0], point[1])));
  }
  EXPECT_LT(worst_error, 0.1);
  Eigen::VectorXd inside(2), outside(2);
  inside << inputs(0, 0), inputs(0, 1);
  outside << 0.5, 1.0;
  EXPECT_LT(process->Predict(inside).stddev, 0.05);
  EXPECT_GT(process->Predict(outside).stddev, 5 * process->Predict(inside).stddev);
}

TEST(GaussianProcessTest, NoisyObservationsAreSmoothedNotInterpolated) {
  RandomSource random(8);
  const int n = 60;
  Eigen::MatrixXd inputs(n, 1);
  Eigen::VectorXd targets(n);
  for (int i = 0; i < n; ++i) {
    inputs(i, 0) = random.Uniform();
    targets[i] = 2 * inputs(i, 0) + 0.2 * random.Normal();
  }
  absl::StatusOr<GaussianProcess> process =
      GaussianProcess::Fit(inputs, targets, Eigen::VectorXd::Zero(n), 4, random);
  ASSERT_TRUE(process.ok()) << process.status();
  // The fitted noise is near 0.2^2 in standardised units (targets' variance is ~0.37).
  EXPECT_GT(process->noise_variance(), 0.02);
  Eigen::VectorXd middle(1);
  middle << 0.5;
  EXPECT_NEAR(process->Predict(middle).mean, 1.0, 0.15);
}

TEST(GaussianProcessTest, ConditionMovesThePosteriorWithTheSameHyperParameters) {
  RandomSource random(2);
  Eigen::MatrixXd inputs(3, 1);
  inputs << 0.1, 0.5, 0.9;
  Eigen::VectorXd targets(3);
  targets << 1.0, 0.0, 1.0;
  absl::StatusOr<GaussianProcess> process =
      GaussianProcess::Fit(inputs, targets, Eigen::VectorXd::Zero(3), 2, random);
  ASSERT_TRUE(process.ok()) << process.status();
  const Eigen::VectorXd scales = process->length_scales();
  Eigen::MatrixXd more(4, 1);
  more << 0.1, 0.5, 0.9, 0.3;
  Eigen::VectorXd more_targets(4);
  more_targets << 1.0, 0.0, 1.0, -1.0;
  ASSERT_TRUE(process->Condition(more, more_targets, Eigen::VectorXd::Zero(4)).ok());
  Eigen::VectorXd point(1);
  point << 0.3;
  EXPECT_NEAR(process->Predict(point).mean, -1.0, 0.1);
  EXPECT_EQ(process->length_scales(), scales);
}

TEST(GaussianProcessTest, RefusesTooLittleData) {
  RandomSource random(1);
  Eigen::MatrixXd one(1, 2);
  one << 0.5, 0.5;
  EXPECT_EQ(GaussianProcess::Fit(one, Eigen::VectorXd::Ones(1), Eigen::VectorXd::Zero(1), 1, random)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  Eigen::MatrixXd two(2, 2);
  two << 0.1, 0.1, 0.9, 0.9;
  EXPECT_EQ(GaussianProcess::Fit(two, Eigen::VectorXd::Ones(3), Eigen::VectorXd::Zero(2), 1, random)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Identical targets (zero spread) still fit.
  EXPECT_TRUE(
      GaussianProcess::Fit(two, Eigen::VectorXd::Ones(2), Eigen::VectorXd::Zero(2), 1, random)
          .ok());
}

// The study searches mix (seed, stream) with splitmix64's finaliser: stream 0 of seed 0 is
// splitmix64's first output from state 0, and every stream differs.
TEST(RandomSourceTest, SeedMixingIsSplitMix64) {
  EXPECT_EQ(RandomSource::Mix(0, 0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(RandomSource::Mix(0, 1), 0x6e789e6aa1b965f4ULL);
  std::set<uint64_t> seen;
  for (uint64_t stream = 0; stream < 1000; ++stream) seen.insert(RandomSource::Mix(9, stream));
  EXPECT_EQ(seen.size(), 1000u);
}

}  // namespace
}  // namespace gantry::studies
