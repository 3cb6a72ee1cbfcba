// The field-standard metrics: ROC AUC and isotonic calibration on known inputs, the classifier
// two-sample test and the Frechet distance on Gaussian samples of known separation, and
// FieldMetrics on toy Monte Carlo (MC against MC, a distorted sample, empty showers).
#include "workers/physics/field_metrics.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "showers/toy_mc.h"
#include "workers/physics/high_level_features.h"
#include "workers/physics/two_sample.h"

namespace gantry::physics {
namespace {

// `events` draws of `inputs` independent normals, the first input shifted by `shift`.
Sample Gaussian(int64_t events, int64_t inputs, double shift, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Sample s;
  s.events = events;
  s.inputs = inputs;
  for (int64_t e = 0; e < events; ++e) {
    for (int64_t i = 0; i < inputs; ++i) {
      s.values.push_back(static_cast<float>(normal(rng) + (i == 0 ? shift : 0.0)));
    }
  }
  return s;
}

TEST(RocAucTest, SeparatedTiedAndReversedScores) {
  EXPECT_DOUBLE_EQ(RocAuc({0.1, 0.2, 0.8, 0.9}, {false, false, true, true}), 1.0);
  EXPECT_DOUBLE_EQ(RocAuc({0.1, 0.2, 0.8, 0.9}, {true, true, false, false}), 0.0);
  EXPECT_DOUBLE_EQ(RocAuc({0.5, 0.5, 0.5, 0.5}, {false, true, false, true}), 0.5);
  // One positive above one of two negatives, tied with the other: (1 + 0.5) / 2.
  EXPECT_DOUBLE_EQ(RocAuc({0.1, 0.3, 0.3}, {false, false, true}), 0.75);
  EXPECT_DOUBLE_EQ(RocAuc({0.1, 0.3}, {true, true}), 0.5);  // one class only
}

TEST(IsotonicTest, FitIsNonDecreasingAndPoolsViolators) {
  // Labels 0 1 0 1 1 at increasing scores: the violating pair (1, 0) pools to 0.5.
  const IsotonicCalibration c = FitIsotonic({1, 2, 3, 4, 5}, {false, true, false, true, true});
  ASSERT_EQ(c.value.size(), 3u);
  EXPECT_DOUBLE_EQ(c.value[0], 0.0);
  EXPECT_DOUBLE_EQ(c.value[1], 0.5);
  EXPECT_DOUBLE_EQ(c.value[2], 1.0);
  EXPECT_DOUBLE_EQ(ApplyCalibration(c, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(ApplyCalibration(c, 2.5), 0.5);
  EXPECT_DOUBLE_EQ(ApplyCalibration(c, 99.0), 1.0);
}

TEST(ClassifierTwoSampleTest, SameDistributionScoresNearOneHalf) {
  ClassifierOptions o;
  auto r = ClassifierTwoSampleTest(Gaussian(1000, 5, 0, 1), Gaussian(1000, 5, 0, 2), o);
  ASSERT_TRUE(r.ok()) << r.status();
  // 400 test events: the AUC of a useless classifier has a standard error of about 0.03.
  EXPECT_NEAR(r->auc, 0.5, 0.07);
  EXPECT_EQ(r->per_seed.size(), 3u);
}

TEST(ClassifierTwoSampleTest, ShiftedMeanIsFoundAtItsTheoreticalAuc) {
  // A shift of 1.5 standard deviations in one of 5 inputs: the optimal AUC is
  // Phi(1.5 / sqrt 2) = 0.856.
  auto r = ClassifierTwoSampleTest(Gaussian(1000, 5, 0, 3), Gaussian(1000, 5, 1.5, 4), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->auc, 0.856, 0.05);
  EXPECT_GT(r->best_epoch, 0);
}

TEST(ClassifierTwoSampleTest, DeterministicForASeedAndSeedsDiffer) {
  ClassifierOptions o;
  o.seeds = 2;
  const Sample a = Gaussian(300, 3, 0, 5), b = Gaussian(300, 3, 0.5, 6);
  auto r1 = ClassifierTwoSampleTest(a, b, o), r2 = ClassifierTwoSampleTest(a, b, o);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(r1->per_seed, r2->per_seed);
  EXPECT_NE(r1->per_seed[0], r1->per_seed[1]);
  EXPECT_GT(r1->spread, 0);
}

TEST(ClassifierTwoSampleTest, RejectsBadInput) {
  EXPECT_EQ(ClassifierTwoSampleTest(Gaussian(100, 3, 0, 1), Gaussian(100, 4, 0, 2), {})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClassifierTwoSampleTest(Gaussian(5, 3, 0, 1), Gaussian(100, 3, 0, 2), {})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  Sample nan = Gaussian(100, 3, 0, 1);
  nan.values[7] = std::nanf("");
  EXPECT_EQ(ClassifierTwoSampleTest(nan, Gaussian(100, 3, 0, 2), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ClassifierOptions bad;
  bad.seeds = 0;
  EXPECT_EQ(ClassifierTwoSampleTest(Gaussian(100, 3, 0, 1), Gaussian(100, 3, 0, 2), bad)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FrechetDistanceTest, ZeroForOneSampleAndTheShiftSquaredForAShift) {
  const Sample a = Gaussian(4000, 4, 0, 7);
  auto same = FrechetDistance(a, a);
  ASSERT_TRUE(same.ok());
  EXPECT_NEAR(*same, 0.0, 1e-6);
  // A shift of 2 standard deviations in one input: 4, plus the sampling noise of the moments.
  auto shifted = FrechetDistance(a, Gaussian(4000, 4, 2.0, 8));
  ASSERT_TRUE(shifted.ok());
  EXPECT_NEAR(*shifted, 4.0, 0.3);
  auto independent = FrechetDistance(a, Gaussian(4000, 4, 0, 9));
  ASSERT_TRUE(independent.ok());
  EXPECT_LT(*independent, 0.05);
}

showers::ShowerSet Toy(int64_t events, uint64_t seed, double energy_scale = 1.0) {
  showers::ToyMcConfig c;
  c.events = events;
  c.seed = seed;
  c.energy_min_gev = 20;
  c.energy_max_gev = 200;
  c.energy_scale = energy_scale;
  c.threads = 2;
  auto s = showers::SimulateToyMc(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

TEST(HighLevelFeaturesTest, NamesGroupsAndValuesOfAToyShower) {
  const showers::ShowerSet s = Toy(20, 1);
  const FeatureTable t = HighLevelFeatures(s, 3e-4);
  ASSERT_EQ(t.features(), 25 * 5 + 4);
  EXPECT_EQ(t.names[0], "layer_energy_00");
  EXPECT_EQ(t.groups[25], "layer_centroid_x");
  EXPECT_EQ(t.names.back(), "shower_max");
  for (int64_t e = 0; e < t.events; ++e) {
    double sum = 0;
    for (int l = 0; l < 25; ++l) sum += t.at(e, l);
    EXPECT_NEAR(t.at(e, 125), sum / s.energy_gev[e], 1e-9);  // sampling_fraction
    EXPECT_GE(t.at(e, 127), t.at(e, 126));                    // nonzero_cells >= hits
    // The toy's showers enter at the grid's centre, cell 12: centroid 12.5 in cell units.
    EXPECT_NEAR(t.at(e, 25 + 5), 12.5, 1.0);
  }
}

// MC against MC, a sample with 20% more energy per cell, and empty showers.
TEST(FieldMetricsTest, MonteCarloAgainstItselfADistortionAndEmptyShowers) {
  const showers::ShowerSet reference = Toy(600, 11), same = Toy(300, 12),
                           hot = Toy(300, 13, 1.2);
  showers::ShowerSet empty = same;
  std::fill(empty.cells.begin(), empty.cells.end(), 0.0f);
  FieldMetricsOptions o;
  o.max_cell_values = 200 * 15626;

  auto mc = FieldMetrics(reference, same, nullptr, o);
  ASSERT_TRUE(mc.ok()) << mc.status();
  const auto& m = *mc;
  EXPECT_EQ(m.at("field_events"), 300);
  EXPECT_EQ(m.at("field_cell_events"), 200);
  for (const char* key : {"auc_features", "auc_features_floor", "auc_cells", "auc_cells_floor"}) {
    EXPECT_NEAR(m.at(key), 0.5, 0.12) << key;
  }
  EXPECT_NEAR(m.at("nonzero_cells_ratio"), 1.0, 0.05);
  EXPECT_NEAR(m.at("nonzero_cells_ratio_floor"), 1.0, 0.05);
  for (const char* key : {"hits_spread_ratio", "sampling_fraction_spread_ratio"}) {
    EXPECT_NEAR(m.at(key), 1.0, 0.25) << key;
  }
  // MC against MC sits at its floor: within a factor 2 for the binned and moment distances.
  EXPECT_LT(m.at("sep_mean"), 2 * m.at("sep_mean_floor"));
  EXPECT_LT(m.at("fpd"), 2 * m.at("fpd_floor"));

  auto distorted = FieldMetrics(reference, hot, nullptr, o);
  ASSERT_TRUE(distorted.ok()) << distorted.status();
  EXPECT_GT(distorted->at("auc_features"), 0.9);
  EXPECT_GT(distorted->at("sep_sampling_fraction"), 5 * distorted->at("sep_sampling_fraction_floor"));
  // 300 events of 129 features: even extrapolated, the Frechet distance's floor is several units.
  EXPECT_GT(distorted->at("fpd"), 2 * distorted->at("fpd_floor"));
  // The floor does not depend on the generated sample.
  EXPECT_EQ(distorted->at("fpd_floor"), m.at("fpd_floor"));

  auto nothing = FieldMetrics(reference, empty, nullptr, o);
  ASSERT_TRUE(nothing.ok()) << nothing.status();
  EXPECT_GT(nothing->at("auc_features"), 0.98);
  EXPECT_GT(nothing->at("auc_cells"), 0.98);
  EXPECT_EQ(nothing->at("nonzero_cells_ratio"), 0.0);
  EXPECT_GT(nothing->at("sep_mean"), 0.5);
}

TEST(FieldMetricsTest, ASecondReferenceGivesTheFloorAndInputsAreChecked) {
  const showers::ShowerSet reference = Toy(200, 21), second = Toy(200, 22), gen = Toy(200, 23);
  FieldMetricsOptions o;
  o.cells_classifier = false;
  auto m = FieldMetrics(reference, gen, &second, o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->at("field_events"), 200);
  EXPECT_EQ(m->count("auc_cells"), 0u);
  EXPECT_NEAR(m->at("auc_features_floor"), 0.5, 0.15);

  showers::ToyMcConfig wide;
  wide.layout = showers::Layout::kVariableAngle3DGan;
  wide.events = 20;
  auto other = showers::SimulateToyMc(wide);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(FieldMetrics(reference, *other, nullptr, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  const showers::ShowerSet tiny = Toy(15, 24);
  auto few = FieldMetrics(tiny, gen, nullptr, o);  // 7 and 8 events per half
  EXPECT_EQ(few.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(few.status().message().find("halves"), std::string::npos);
}

}  // namespace
}  // namespace gantry::physics
