// GenerationPlan and CounterRng: request validation against the served model, condition draws
// from (seed, index), angle defaults, and the counter-based noise.
#include "workers/serving/generation_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "workers/serving/counter_rng.h"

namespace gantry::serving {
namespace {

namespace v1 = ::gantry::v1;

v1::WorkerGenerateRequest RangeRequest(double lo, double hi, int64_t count, uint64_t seed) {
  v1::WorkerGenerateRequest r;
  r.mutable_model()->set_model_ref("ele:3");
  r.mutable_model()->mutable_energy_range_gev()->set_min(10);
  r.mutable_model()->mutable_energy_range_gev()->set_max(500);
  r.mutable_request()->mutable_range()->mutable_energy_gev()->set_min(lo);
  r.mutable_request()->mutable_range()->mutable_energy_gev()->set_max(hi);
  r.mutable_request()->mutable_range()->set_count(count);
  r.mutable_request()->set_seed(seed);
  return r;
}

ModelTraits Angle51() {
  ModelTraits t;
  t.grid = {51, 51, 25};
  t.variable_angle = true;
  return t;
}

TEST(GenerationPlanTest, RangeDrawsDependOnlyOnSeedAndIndex) {
  auto a = GenerationPlan::Create(RangeRequest(20, 400, 1000, 9), ModelTraits{});
  auto b = GenerationPlan::Create(RangeRequest(20, 400, 5, 9), ModelTraits{});
  auto c = GenerationPlan::Create(RangeRequest(20, 400, 1000, 10), ModelTraits{});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status();
  EXPECT_EQ(a->count(), 1000);
  EXPECT_EQ(a->chunk_showers(), GenerationPlan::kDefaultChunkShowers);
  double lo = 1e9, hi = 0;
  int differ = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const ShowerSpec s = a->Shower(i);
    EXPECT_EQ(s.seed, 9u);
    EXPECT_EQ(s.index, i);
    lo = std::min<double>(lo, s.energy_gev);
    hi = std::max<double>(hi, s.energy_gev);
    if (i < 5) EXPECT_EQ(s.energy_gev, b->Shower(i).energy_gev);  // the count does not matter
    if (s.energy_gev != c->Shower(i).energy_gev) ++differ;
  }
  EXPECT_GE(lo, 20);
  EXPECT_LE(hi, 400);
  EXPECT_LT(lo, 40);  // spread over the range
  EXPECT_GT(hi, 380);
  EXPECT_GT(differ, 990);
}

TEST(GenerationPlanTest, RefusesWhatTheWorkerCannotServe) {
  auto out_of_range = GenerationPlan::Create(RangeRequest(5, 100, 10, 1), ModelTraits{});
  ASSERT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.status().message().find("10..500 GeV"), std::string::npos)
      << out_of_range.status();
  EXPECT_EQ(GenerationPlan::Create(RangeRequest(20, 100, 10, 0), ModelTraits{}).status().code(),
            absl::StatusCode::kInvalidArgument);  // seed 0
  EXPECT_EQ(GenerationPlan::Create(RangeRequest(20, 100, 0, 1), ModelTraits{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto bf16 = RangeRequest(20, 100, 10, 1);
  bf16.mutable_request()->set_precision(v1::PRECISION_BF16);
  ModelTraits no_bf16;
  no_bf16.bf16_unavailable = "this worker's CPU lacks AVX512-BF16/AMX; use PRECISION_FP32";
  const absl::Status refused = GenerationPlan::Create(bf16, no_bf16).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(), no_bf16.bf16_unavailable);
  ModelTraits with_bf16;
  with_bf16.bf16_unavailable.clear();
  absl::StatusOr<GenerationPlan> bf16_plan = GenerationPlan::Create(bf16, with_bf16);
  ASSERT_TRUE(bf16_plan.ok()) << bf16_plan.status();
  EXPECT_TRUE(bf16_plan->bfloat16());
  EXPECT_TRUE(bf16_plan->Shower(3).bfloat16);
  absl::StatusOr<GenerationPlan> fp32_plan =
      GenerationPlan::Create(RangeRequest(20, 100, 10, 1), with_bf16);
  ASSERT_TRUE(fp32_plan.ok()) << fp32_plan.status();
  EXPECT_FALSE(fp32_plan->Shower(3).bfloat16);
  auto chunk = RangeRequest(20, 100, 10, 1);
  chunk.mutable_request()->set_chunk_showers(5000);
  EXPECT_EQ(GenerationPlan::Create(chunk, ModelTraits{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::WorkerGenerateRequest none = RangeRequest(20, 100, 10, 1);
  none.mutable_request()->clear_range();
  EXPECT_EQ(GenerationPlan::Create(none, ModelTraits{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GenerationPlanTest, AnglesDefaultToTheModelsTrainingRange) {
  v1::WorkerGenerateRequest r = RangeRequest(50, 50, 1, 4);
  r.mutable_request()->clear_range();
  v1::Condition* c = r.mutable_request()->mutable_list()->add_items();
  c->set_energy_gev(50);  // theta 0: the model's default angle
  c = r.mutable_request()->mutable_list()->add_items();
  c->set_energy_gev(60);
  c->set_theta_rad(1.2);
  auto fixed = GenerationPlan::Create(r, ModelTraits{});
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->Shower(1).theta_rad, 0.0f);  // fixed-angle models ignore theta
  auto var = GenerationPlan::Create(r, Angle51());
  ASSERT_TRUE(var.ok()) << var.status();
  EXPECT_NEAR(var->Shower(0).theta_rad, M_PI / 2, 1e-6);
  EXPECT_NEAR(var->Shower(1).theta_rad, 1.2, 1e-6);
  r.mutable_request()->mutable_list()->mutable_items(1)->set_theta_rad(0.5);
  auto outside = GenerationPlan::Create(r, Angle51());
  ASSERT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("items[1].theta_rad"), std::string::npos);

  // A range without theta draws from the served model's training range.
  v1::WorkerGenerateRequest range = RangeRequest(50, 60, 200, 4);
  range.mutable_model()->mutable_theta_range_rad()->set_min(1.4);
  range.mutable_model()->mutable_theta_range_rad()->set_max(1.7);
  auto drawn = GenerationPlan::Create(range, Angle51());
  ASSERT_TRUE(drawn.ok()) << drawn.status();
  for (int i = 0; i < 200; ++i) {
    EXPECT_GE(drawn->Shower(i).theta_rad, 1.4f - 1e-6f);
    EXPECT_LE(drawn->Shower(i).theta_rad, 1.7f + 1e-6f);
  }
  EXPECT_NE(drawn->Shower(0).theta_rad, drawn->Shower(1).theta_rad);
}

TEST(CounterRngTest, NoiseIsStandardNormalAndAFunctionOfSeedAndIndex) {
  std::vector<float> a(200), b(200), c(200), d(200);
  CounterRng::Normal(5, 17, 200, a.data());
  CounterRng::Normal(5, 17, 200, b.data());
  CounterRng::Normal(5, 18, 200, c.data());
  CounterRng::Normal(6, 17, 200, d.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  // A prefix of a longer draw equals the shorter draw (odd widths too).
  std::vector<float> short_draw(7);
  CounterRng::Normal(5, 17, 7, short_draw.data());
  EXPECT_TRUE(std::equal(short_draw.begin(), short_draw.end(), a.begin()));
  double sum = 0, sum2 = 0;
  const int n = 2000;
  std::vector<float> x(100);
  for (int i = 0; i < n; ++i) {
    CounterRng::Normal(1, i, 100, x.data());
    for (float v : x) {
      sum += v;
      sum2 += v * v;
    }
  }
  const double mean = sum / (n * 100.0), var = sum2 / (n * 100.0) - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.02);
}

}  // namespace
}  // namespace gantry::serving
