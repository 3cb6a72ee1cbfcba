#include "clients/plots/axis_ticks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace gantry::plots {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Labels(const AxisTicks& axis) {
  std::vector<std::string> out;
  for (const Tick& t : axis.ticks) out.push_back(t.label);
  return out;
}

TEST(AxisTicksTest, LinearTicksAreNiceNumbersAndCoverTheRange) {
  const AxisTicks a = LinearTicks(0, 0.93, 5, true);
  EXPECT_DOUBLE_EQ(a.lo, 0);
  EXPECT_DOUBLE_EQ(a.hi, 1.0);
  EXPECT_THAT(Labels(a), ElementsAre("0.0", "0.2", "0.4", "0.6", "0.8", "1.0"));

  const AxisTicks b = LinearTicks(10, 490, 6, true);
  EXPECT_THAT(Labels(b), ElementsAre("0", "100", "200", "300", "400", "500"));

  const AxisTicks c = LinearTicks(0.013, 0.0215, 4, true);
  EXPECT_THAT(Labels(c), ElementsAre("0.010", "0.015", "0.020", "0.025"));
}

TEST(AxisTicksTest, WithoutExpandTheRangeIsKeptAndTicksStayInside) {
  const AxisTicks a = LinearTicks(-0.5, 24.5, 5, false);
  EXPECT_DOUBLE_EQ(a.lo, -0.5);
  EXPECT_DOUBLE_EQ(a.hi, 24.5);
  EXPECT_THAT(Labels(a), ElementsAre("0", "5", "10", "15", "20"));
}

TEST(AxisTicksTest, DegenerateAndNonFiniteRangesBecomeUsable) {
  const AxisTicks same = LinearTicks(2, 2, 5, true);
  EXPECT_LT(same.lo, 2);
  EXPECT_GT(same.hi, 2);
  EXPECT_GE(same.ticks.size(), 2u);
  const AxisTicks nan = LinearTicks(NAN, 1, 5, true);
  EXPECT_DOUBLE_EQ(nan.lo, 0);
  EXPECT_DOUBLE_EQ(nan.hi, 1);
  const AxisTicks zero = LinearTicks(0, 0, 5, true);
  EXPECT_LT(zero.lo, zero.hi);
}

TEST(AxisTicksTest, LogTicksAreWholeDecades) {
  const AxisTicks a = LogTicks(3e-4, 20);
  EXPECT_DOUBLE_EQ(a.lo, 1e-4);
  EXPECT_DOUBLE_EQ(a.hi, 1e2);
  ASSERT_EQ(a.ticks.size(), 7u);
  EXPECT_TRUE(a.ticks[0].has_exponent);
  EXPECT_EQ(a.ticks[0].exponent, -4);
  EXPECT_EQ(a.ticks[6].exponent, 2);
  EXPECT_EQ(a.ticks[0].label, "1e-4");

  // Many decades: every n-th, at most 9 ticks.
  EXPECT_LE(LogTicks(1e-30, 1e30).ticks.size(), 9u);
  // Nothing positive: a default range instead of log(0).
  const AxisTicks none = LogTicks(0, 0);
  EXPECT_GT(none.lo, 0);
  EXPECT_GT(none.hi, none.lo);
}

TEST(AxisTicksTest, FormatTickUsesTheStepsDecimals) {
  EXPECT_EQ(FormatTick(0.5, 0.1), "0.5");
  EXPECT_EQ(FormatTick(150, 50), "150");
  EXPECT_EQ(FormatTick(-1e-17, 0.2), "0.0");
  EXPECT_EQ(FormatTick(2e6, 1e6), "2e+06");
}

}  // namespace
}  // namespace gantry::plots
