// Tests of GenerationProgress: the bar's text (done/total, rate, ETA) and when it is redrawn on a
// terminal (\r, throttled) and printed as lines otherwise.
#include "clients/cli/generation_progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gantry::cli {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000000);

TEST(GenerationProgressTest, LineShowsDoneTotalRateAndEta) {
  GenerationProgress progress(1000, false, kStart);
  EXPECT_EQ(progress.Line(0, kStart), "[--------------------]  0/1000 showers  -  ETA -");
  // 250 showers in 5 s: 50/s, 750 left -> 15 s.
  EXPECT_EQ(progress.Line(250, kStart + absl::Seconds(5)),
            "[#####---------------]  250/1000 showers  50.0/s  ETA 15s");
  EXPECT_EQ(progress.Line(1000, kStart + absl::Seconds(100)),
            "[####################]  1000/1000 showers  10.0/s  ETA 0s");
  GenerationProgress slow(100000, false, kStart);
  EXPECT_EQ(slow.Line(1000, kStart + absl::Seconds(10)),
            "[--------------------]  1000/100000 showers  100.0/s  ETA 16m30s");
}

TEST(GenerationProgressTest, TerminalRedrawsInPlaceAtMostEveryInterval) {
  GenerationProgress progress(100, true, kStart, absl::Milliseconds(100));
  const std::string first = progress.Update(10, kStart + absl::Seconds(1));
  EXPECT_EQ(first, "\r[##------------------]  10/100 showers  10.0/s  ETA 9s");
  EXPECT_EQ(progress.Update(11, kStart + absl::Milliseconds(1050)), "");  // too soon
  EXPECT_THAT(progress.Update(20, kStart + absl::Seconds(2)), ::testing::StartsWith("\r[####"));
  const std::string last = progress.Finish(100, kStart + absl::Milliseconds(2010));
  EXPECT_EQ(last.front(), '\r');
  EXPECT_EQ(last.back(), '\n');
  EXPECT_THAT(last, ::testing::HasSubstr("100/100 showers"));
}

TEST(GenerationProgressTest, PipePrintsPeriodicLines) {
  GenerationProgress progress(100, false, kStart, absl::Milliseconds(100), absl::Seconds(5));
  EXPECT_EQ(progress.Update(1, kStart + absl::Seconds(1)),
            "[--------------------]  1/100 showers  1.0/s  ETA 1m39s\n");
  EXPECT_EQ(progress.Update(2, kStart + absl::Seconds(3)), "");
  EXPECT_EQ(progress.Update(3, kStart + absl::Seconds(5)), "");
  const std::string later = progress.Update(6, kStart + absl::Seconds(6));
  EXPECT_THAT(later, ::testing::StartsWith("[#-"));
  EXPECT_EQ(later.find('\r'), std::string::npos);
  EXPECT_EQ(progress.Finish(100, kStart + absl::Seconds(7)).back(), '\n');
}

}  // namespace
}  // namespace gantry::cli
