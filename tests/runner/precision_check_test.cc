// PrecisionCheck::Decide, the BF16 physics guard's rule, on synthetic validation metrics; and
// PrecisionCheck::Run's answer on a worker that lacks bfloat16 hardware (the override).
#include "workers/runner/precision_check.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "workers/gan/bf16_support.h"

namespace gantry::runner {
namespace {

namespace v1 = ::gantry::v1;
using Metrics = std::map<std::string, double>;

// FP32 metrics of a decent model: each metric comfortably above its null.
Metrics Fp32() {
  return {{"sf_mre", 0.05}, {"sf_mre_null", 0.01}, {"eprof", 0.20}, {"eprof_null", 0.04},
          {"pos", 0.10},    {"pos_null", 0.02},    {"fom", 0.35},   {"ang", 0.0}};
}

TEST(PrecisionCheckTest, DifferencesWithinTheNullMakeBf16Available) {
  Metrics bf16 = Fp32();
  bf16["sf_mre"] += 0.0099;  // just inside 0.01
  bf16["eprof"] -= 0.0399;   // just inside 0.04, the other way
  bf16["pos"] += 0.015;
  const v1::Bf16Check check = PrecisionCheck::Decide(Fp32(), bf16);
  EXPECT_EQ(check.state(), v1::Bf16Check::STATE_AVAILABLE) << check.reason();
  EXPECT_NE(check.reason().find("eprof"), std::string::npos) << check.reason();
}

TEST(PrecisionCheckTest, ADifferenceBeyondTheNullNamesTheMetric) {
  for (const std::string metric : {"sf_mre", "eprof", "pos"}) {
    Metrics bf16 = Fp32();
    bf16[metric] += 1.5 * Fp32()[metric + "_null"];
    const v1::Bf16Check check = PrecisionCheck::Decide(Fp32(), bf16);
    EXPECT_EQ(check.state(), v1::Bf16Check::STATE_UNAVAILABLE) << metric;
    EXPECT_EQ(check.reason().rfind(metric + " is ", 0), 0u) << check.reason();
    EXPECT_NE(check.reason().find("exceeds the statistical null"), std::string::npos)
        << check.reason();
  }
  // Better than FP32 by more than the null is a difference all the same (the precision changed
  // the physics; it is not a free improvement).
  Metrics better = Fp32();
  better["eprof"] = 0.10;
  EXPECT_EQ(PrecisionCheck::Decide(Fp32(), better).state(), v1::Bf16Check::STATE_UNAVAILABLE);
}

TEST(PrecisionCheckTest, TheLargerOfTheTwoNullsIsTheTolerance) {
  Metrics bf16 = Fp32();
  bf16["pos"] += 0.03;       // beyond FP32's null 0.02 ...
  bf16["pos_null"] = 0.035;  // ... but within BF16's own
  EXPECT_EQ(PrecisionCheck::Decide(Fp32(), bf16).state(), v1::Bf16Check::STATE_AVAILABLE);
}

TEST(PrecisionCheckTest, NonFiniteAndMissingMetrics) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Metrics bf16 = Fp32();
  bf16["eprof"] = std::numeric_limits<double>::infinity();
  v1::Bf16Check check = PrecisionCheck::Decide(Fp32(), bf16);
  EXPECT_EQ(check.state(), v1::Bf16Check::STATE_UNAVAILABLE);
  EXPECT_NE(check.reason().find("eprof is inf in BF16"), std::string::npos) << check.reason();
  bf16["eprof"] = nan;
  EXPECT_EQ(PrecisionCheck::Decide(Fp32(), bf16).state(), v1::Bf16Check::STATE_UNAVAILABLE);

  // A metric FP32 could not measure is not judged; the others still are.
  Metrics fp32 = Fp32();
  fp32.erase("pos");
  fp32["eprof_null"] = nan;
  Metrics far = Fp32();
  far["pos"] = 5;    // not judged
  far["eprof"] = 9;  // not judged (no finite FP32 null)
  EXPECT_EQ(PrecisionCheck::Decide(fp32, far).state(), v1::Bf16Check::STATE_AVAILABLE);
  far["sf_mre"] = 0.5;
  EXPECT_EQ(PrecisionCheck::Decide(fp32, far).state(), v1::Bf16Check::STATE_UNAVAILABLE);

  // Nothing to compare at all.
  check = PrecisionCheck::Decide(Metrics{{"fom", 1}}, Fp32());
  EXPECT_EQ(check.state(), v1::Bf16Check::STATE_NOT_CHECKED);
  EXPECT_FALSE(check.reason().empty());
}

TEST(PrecisionCheckTest, AWorkerWithoutBf16HardwareRecordsNotChecked) {
  ASSERT_EQ(setenv(gan::kPretendNoBf16Env, "1", 1), 0);
  absl::StatusOr<gan::ModelConfig> config = gan::PresetConfig("tiny");
  ASSERT_TRUE(config.ok()) << config.status();
  gan::Generator generator(*config);
  PrecisionCheck::Fp32Validation fp32;
  fp32.request.energy_gev = {50, 100};
  fp32.metrics = Fp32();
  const v1::Bf16Check check = PrecisionCheck::Run(*config, generator, showers::ShowerSet{}, fp32);
  unsetenv(gan::kPretendNoBf16Env);
  EXPECT_EQ(check.state(), v1::Bf16Check::STATE_NOT_CHECKED);
  EXPECT_EQ(check.reason(), "this worker's CPU lacks AVX512-BF16/AMX; use PRECISION_FP32");
}

}  // namespace
}  // namespace gantry::runner
