// Tests of ShowerSummary: sampling fraction and shower-maximum depth of hand-built showers (figures
// worked out by hand), the layer axis of each layout, block-wise file reading, and toy Monte Carlo
// samples whose profile is stretched in depth.
#include "workers/physics/shower_summary.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>

#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"

namespace gantry::physics {
namespace {

using showers::Layout;
using showers::ShowerSet;

// A fixed-angle set of `energies.size()` empty showers.
ShowerSet Empty(std::vector<float> energies) {
  ShowerSet set;
  set.energy_gev = std::move(energies);
  set.cells.assign(set.energy_gev.size() * set.cells_per_event(), 0.0f);
  return set;
}

float& Cell(ShowerSet& set, int64_t event, int x, int y, int z) {
  return set.mutable_event(event)[(x * set.shape[1] + y) * set.shape[2] + z];
}

TEST(ShowerSummaryTest, HandBuiltShowers) {
  ShowerSet set = Empty({100.0f, 50.0f, 20.0f});
  // Event 0: 1 GeV in layer 5 (split over two cells), 0.5 GeV in layer 9: SF 0.015, maximum at
  // layer 5, centroid (5 * 1 + 9 * 0.5) / 1.5 = 6.3333.
  Cell(set, 0, 12, 12, 5) = 0.75f;
  Cell(set, 0, 3, 20, 5) = 0.25f;
  Cell(set, 0, 12, 13, 9) = 0.5f;
  // Event 1: 2 GeV in layer 3: SF 0.04, maximum and centroid at 3.
  Cell(set, 1, 0, 0, 3) = 2.0f;
  // Event 2 stays empty: SF 0, no depth figures.
  ShowerSummary summary;
  summary.Add(set);
  EXPECT_EQ(summary.events(), 3);
  EXPECT_EQ(summary.empty_events(), 1);
  EXPECT_DOUBLE_EQ(summary.energy_min_gev(), 20.0);
  EXPECT_DOUBLE_EQ(summary.energy_max_gev(), 100.0);
  const Spread sf = summary.sampling_fraction();
  EXPECT_EQ(sf.n, 3);
  EXPECT_NEAR(sf.mean, (0.015 + 0.04 + 0.0) / 3, 1e-7);
  // Sample standard deviation of {0.015, 0.04, 0}: mean 0.018333, squared deviations sum
  // 0.000011111 + 0.000469444 + 0.000336111 = 0.000816667, / 2 -> sqrt = 0.0202073.
  EXPECT_NEAR(sf.stddev, 0.0202073, 1e-6);
  EXPECT_NEAR(sf.error, 0.0202073 / std::sqrt(3.0), 1e-6);
  const Spread max = summary.shower_max_layer();
  EXPECT_EQ(max.n, 2);
  EXPECT_DOUBLE_EQ(max.mean, 4.0);
  EXPECT_NEAR(max.stddev, std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(summary.centroid_layer().mean, (19.0 / 3.0 + 3.0) / 2, 1e-6);
  EXPECT_EQ(summary.invalid_cells(), 0);
}

// NaN, infinite and negative cells are counted and read as 0: the figures stay those of the valid
// cells (SF 1 / 100, maximum and centroid at layer 7).
TEST(ShowerSummaryTest, InvalidCellsAreCountedAndReadAsZero) {
  ShowerSet set = Empty({100.0f});
  Cell(set, 0, 1, 1, 7) = 1.0f;
  Cell(set, 0, 2, 2, 3) = std::numeric_limits<float>::quiet_NaN();
  Cell(set, 0, 2, 3, 4) = std::numeric_limits<float>::infinity();
  Cell(set, 0, 2, 4, 5) = -3.0f;
  ShowerSummary summary;
  summary.Add(set);
  EXPECT_EQ(summary.invalid_cells(), 3);
  EXPECT_DOUBLE_EQ(summary.sampling_fraction().mean, 0.01);
  EXPECT_DOUBLE_EQ(summary.shower_max_layer().mean, 7.0);
  EXPECT_DOUBLE_EQ(summary.centroid_layer().mean, 7.0);
}

TEST(ShowerSummaryTest, CaloChallengeLayersAreTheFirstAxis) {
  ShowerSet set;
  set.layout = Layout::kCaloChallenge;
  set.shape = {45, 16, 9};
  set.energy_gev = {10.0f};
  set.cells.assign(set.cells_per_event(), 0.0f);
  Cell(set, 0, 30, 4, 2) = 0.3f;
  Cell(set, 0, 10, 0, 8) = 0.1f;
  ShowerSummary summary;
  summary.Add(set);
  EXPECT_DOUBLE_EQ(summary.shower_max_layer().mean, 30.0);
  EXPECT_NEAR(summary.sampling_fraction().mean, 0.04, 1e-7);
}

TEST(ShowerSummaryTest, FileInBlocksEqualsTheWholeSet) {
  showers::ToyMcConfig config;
  config.events = 23;
  config.energy_min_gev = 20;
  config.energy_max_gev = 100;
  absl::StatusOr<ShowerSet> set = showers::SimulateToyMc(config);
  ASSERT_TRUE(set.ok());
  const std::string path = "/tmp/gantry-summary-" + std::to_string(::getpid()) + ".h5";
  ASSERT_TRUE(showers::WriteShowerFile(path, *set).ok());
  ShowerSummary whole;
  whole.Add(*set);
  for (int64_t block : {1, 5, 23, 1000}) {
    absl::StatusOr<ShowerSummary> read = SummariseShowerFile(path, block);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->events(), 23) << block;
    EXPECT_NEAR(read->sampling_fraction().mean, whole.sampling_fraction().mean, 1e-12) << block;
    EXPECT_NEAR(read->shower_max_layer().stddev, whole.shower_max_layer().stddev, 1e-9) << block;
  }
  std::remove(path.c_str());
  EXPECT_EQ(SummariseShowerFile("/nonexistent.h5").status().code(), absl::StatusCode::kNotFound);
}

TEST(ShowerSummaryTest, StretchedProfileMovesTheMaximumDeeper) {
  showers::ToyMcConfig config;
  config.events = 300;
  config.energy_min_gev = 50;
  config.energy_max_gev = 150;
  ShowerSummary nominal, stretched, scaled;
  nominal.Add(*showers::SimulateToyMc(config));
  config.seed = 2;
  ShowerSummary same;
  same.Add(*showers::SimulateToyMc(config));
  config.depth_scale = 1.3;
  stretched.Add(*showers::SimulateToyMc(config));
  config.depth_scale = 1.0;
  config.energy_scale = 1.1;
  scaled.Add(*showers::SimulateToyMc(config));
  // An independent sample agrees within a few standard errors.
  const Spread a = nominal.shower_max_layer(), b = same.shower_max_layer();
  EXPECT_LT(std::fabs(a.mean - b.mean), 4 * std::hypot(a.error, b.error));
  // The GFlash maximum of 50-150 GeV electrons in this calorimeter sits in the first half.
  EXPECT_GT(a.mean, 3.0);
  EXPECT_LT(a.mean, 15.0);
  // Depth x1.3 moves the maximum ~30% deeper; the energy scale x1.1 moves SF by 10%.
  EXPECT_NEAR(stretched.shower_max_layer().mean / a.mean, 1.3, 0.1);
  EXPECT_NEAR(scaled.sampling_fraction().mean / nominal.sampling_fraction().mean, 1.1, 0.01);
  EXPECT_NEAR(scaled.shower_max_layer().mean, a.mean, 4 * std::hypot(a.error, b.error));
}

}  // namespace
}  // namespace gantry::physics
