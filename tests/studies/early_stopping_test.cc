// The median stopping rule and ASHA on constructed histories.
#include "studies/early_stopping.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace gantry::studies {
namespace {

using ::testing::HasSubstr;

using Curve = std::vector<IntermediateValue>;

// A curve with value `start - slope * step` at steps 1..last.
Curve Line(double start, double slope, int64_t last) {
  Curve curve;
  for (int64_t step = 1; step <= last; ++step) curve.push_back({step, start - slope * step});
  return curve;
}

bool Stop(const Curve& trial, const std::vector<Curve>& others,
          const EarlyStoppingOptions& options) {
  absl::StatusOr<StopDecision> decision = ShouldStopTrial(trial, others, options);
  EXPECT_TRUE(decision.ok()) << decision.status();
  return decision.ok() && decision->stop;
}

TEST(EarlyStoppingTest, MedianStopsATrialWorseThanTheMedianOfRunningAverages) {
  EarlyStoppingOptions options;
  options.rule = EarlyStoppingRule::kMedian;
  options.min_steps = 3;
  options.min_trials = 3;
  // Others: running averages at step 5 of 10-s, 8-s, 6-s over steps 1..5 are 7, 5, 3: median 5.
  const std::vector<Curve> others = {Line(10, 1, 10), Line(8, 1, 10), Line(6, 1, 10)};
  EXPECT_TRUE(Stop(Line(9, 0.5, 5), others, options));   // best 6.5 > 5
  EXPECT_FALSE(Stop(Line(7, 0.5, 5), others, options));  // best 4.5 <= 5
  // Before min_steps nothing stops, however bad.
  EXPECT_FALSE(Stop(Line(100, 0, 2), others, options));
  // Too few others reached the step: no decision yet.
  EXPECT_FALSE(Stop(Line(100, 0, 5), {others[0], others[1]}, options));
  // Others that stopped before the trial's step do not count.
  EXPECT_FALSE(Stop(Line(100, 0, 5), {others[0], others[1], Line(1, 0, 4)}, options));
  // The order of reports does not matter.
  Curve shuffled = Line(9, 0.5, 5);
  std::reverse(shuffled.begin(), shuffled.end());
  EXPECT_TRUE(Stop(shuffled, others, options));
}

TEST(EarlyStoppingTest, MedianDecisionSaysWhy) {
  EarlyStoppingOptions options;
  options.rule = EarlyStoppingRule::kMedian;
  options.min_trials = 1;
  absl::StatusOr<StopDecision> decision = ShouldStopTrial(Line(9, 0, 2), {Line(1, 0, 2)}, options);
  ASSERT_TRUE(decision.ok());
  EXPECT_TRUE(decision->stop);
  EXPECT_THAT(decision->reason, HasSubstr("worse than the median 1"));
}

TEST(EarlyStoppingTest, AshaKeepsTheBestThirdAtEachRung) {
  EarlyStoppingOptions options;
  options.rule = EarlyStoppingRule::kAsha;
  options.min_steps = 2;  // rungs at steps 2, 6, 18, ...
  options.reduction_factor = 3;
  // Five others reached rung 0 (step 2) with values 1..5.
  std::vector<Curve> others;
  for (int v = 1; v <= 5; ++v) others.push_back({{1, 10.0}, {2, static_cast<double>(v)}});
  // With the trial, six values at the rung: the best two (6 / 3) continue.
  EXPECT_FALSE(Stop({{1, 9}, {2, 1.5}}, others, options));  // second best
  EXPECT_TRUE(Stop({{1, 9}, {2, 2.5}}, others, options));   // third best
  // Decisions are taken when a rung is first reached: a later report between rungs continues.
  EXPECT_FALSE(Stop({{1, 9}, {2, 2.5}, {3, 2.4}}, others, options));
  // A report that jumps past a rung (step 7 >= 6) is judged at that rung, against those there.
  std::vector<Curve> at_rung_one = {{{6, 0.5}}, {{6, 0.7}}, {{7, 0.9}}};
  EXPECT_TRUE(Stop({{2, 0.1}, {7, 0.8}}, at_rung_one, options));  // 3rd of 4: only 1 continues
  EXPECT_FALSE(Stop({{2, 0.1}, {7, 0.4}}, at_rung_one, options));
  // The first trial at a rung is alone there and continues; before the first rung nothing stops.
  EXPECT_FALSE(Stop({{2, 100}}, {}, options));
  EXPECT_FALSE(Stop({{1, 100}}, others, options));
}

TEST(EarlyStoppingTest, DivergedValuesStopAndRankLast) {
  EarlyStoppingOptions options;
  options.rule = EarlyStoppingRule::kAsha;
  options.min_steps = 1;
  EXPECT_TRUE(Stop({{1, std::nan("")}}, {}, options));
  // Another trial's NaN at the rung ranks below this trial's finite value.
  EXPECT_FALSE(Stop({{1, 5.0}}, {{{1, std::nan("")}}, {{1, INFINITY}}}, options));
  options.rule = EarlyStoppingRule::kMedian;
  EXPECT_TRUE(Stop({{1, 1.0}, {2, INFINITY}}, {}, options));
}

TEST(EarlyStoppingTest, BadOptionsAndStepsAreRejected) {
  EarlyStoppingOptions options;
  options.rule = EarlyStoppingRule::kAsha;
  options.reduction_factor = 1;
  EXPECT_THAT(std::string(ShouldStopTrial({}, {}, options).status().message()),
              HasSubstr("reduction_factor is 1: use 2 or more"));
  options = {};
  options.min_steps = 0;
  EXPECT_THAT(std::string(ValidateEarlyStopping(options).message()), HasSubstr("min_steps"));
  options = {};
  options.rule = EarlyStoppingRule::kMedian;
  EXPECT_THAT(std::string(ShouldStopTrial({{-1, 1.0}}, {}, options).status().message()),
              HasSubstr("step -1"));
  EXPECT_THAT(std::string(ParseEarlyStoppingRule("hyperband").status().message()),
              HasSubstr("use none, median or asha"));
  options.rule = EarlyStoppingRule::kNone;
  EXPECT_FALSE(Stop(Line(100, 0, 50), {Line(0, 0, 50)}, options));
}

}  // namespace
}  // namespace gantry::studies
