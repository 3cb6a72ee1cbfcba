// The no-network baselines (baseline::BaselineSampler) against the toy Monte Carlo they are fitted
// to: averages per energy bin, the number of hit cells, determinism, refusals.
#include "workers/baseline/baseline_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "showers/toy_mc.h"

namespace gantry::baseline {
namespace {

showers::ShowerSet Toy(int64_t events, uint64_t seed) {
  showers::ToyMcConfig mc;
  mc.events = events;
  mc.energy_min_gev = 10;
  mc.energy_max_gev = 200;
  mc.seed = seed;
  return *showers::SimulateToyMc(mc);
}

// Per energy bin (4 equal bins over 10-200 GeV): mean and standard error of the total energy over
// E, of every layer's energy over E, and the mean number of non-zero cells.
struct BinStats {
  std::vector<double> sum, sum2;  // [0]: total / E, [1 + z]: layer z / E
  double nonzero = 0;
  int64_t n = 0;
  double Mean(int i) const { return sum[i] / n; }
  double Error(int i) const {
    const double m = Mean(i);
    return std::sqrt(std::max(0.0, sum2[i] / n - m * m) / n);
  }
};

std::vector<BinStats> Stats(const showers::ShowerSet& s) {
  const int64_t nz = s.shape[2];
  std::vector<BinStats> bins(4);
  for (BinStats& b : bins) {
    b.sum.assign(1 + nz, 0.0);
    b.sum2.assign(1 + nz, 0.0);
  }
  for (int64_t i = 0; i < s.events(); ++i) {
    const double e = s.energy_gev[i];
    BinStats& b = bins[std::clamp(static_cast<int>((e - 10) / 47.5), 0, 3)];
    std::vector<double> v(1 + nz, 0.0);
    const float* cells = s.event(i);
    for (int64_t c = 0; c < s.cells_per_event(); ++c) {
      v[0] += cells[c] / e;
      v[1 + c % nz] += cells[c] / e;
      if (cells[c] > 0) b.nonzero += 1;
    }
    for (size_t k = 0; k < v.size(); ++k) {
      b.sum[k] += v[k];
      b.sum2[k] += v[k] * v[k];
    }
    ++b.n;
  }
  return bins;
}

class BaselineSamplerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    train_ = new showers::ShowerSet(Toy(800, 1));
    test_ = new showers::ShowerSet(Toy(800, 2));
  }
  static void TearDownTestSuite() {
    delete train_;
    delete test_;
  }
  static BaselineSampler Fitted(BaselineKind kind) {
    BaselineFitOptions options;
    options.kind = kind;
    absl::StatusOr<BaselineSampler> sampler = BaselineSampler::Fit(*train_, {}, options);
    EXPECT_TRUE(sampler.ok()) << sampler.status();
    return *std::move(sampler);
  }
  static showers::ShowerSet* train_;
  static showers::ShowerSet* test_;
};
showers::ShowerSet* BaselineSamplerTest::train_ = nullptr;
showers::ShowerSet* BaselineSamplerTest::test_ = nullptr;

TEST_F(BaselineSamplerTest, MatchesTheDataOnAverageInEveryEnergyBin) {
  for (BaselineKind kind :
       {BaselineKind::kTemplate, BaselineKind::kSpots, BaselineKind::kSpotsSmeared}) {
    const BaselineSampler sampler = Fitted(kind);
    EXPECT_EQ(sampler.parameters().modes.size(), 2u);
    EXPECT_GT(sampler.parameters().sigma[0], sampler.parameters().sigma[1]);
    EXPECT_GT(sampler.parameters().sigma[1], 0);
    // Independent Monte Carlo against the baseline at the same energies.
    const showers::ShowerSet generated = sampler.Sample(test_->energy_gev, 11);
    const std::vector<BinStats> mc = Stats(*test_), gen = Stats(generated);
    for (int bin = 0; bin < 4; ++bin) {
      SCOPED_TRACE(testing::Message() << BaselinePresetName(kind) << " bin " << bin);
      ASSERT_GT(mc[bin].n, 100);
      // The total over E (the sampling fraction): within 4 standard errors and 2%.
      const double total_error = std::hypot(mc[bin].Error(0), gen[bin].Error(0));
      EXPECT_NEAR(gen[bin].Mean(0), mc[bin].Mean(0),
                  std::max(4 * total_error, 0.02 * mc[bin].Mean(0)));
      // Every layer's mean over E: within 4 standard errors plus 3% of the bin's peak layer (the
      // line in ln E is an approximation inside a bin 47.5 GeV wide).
      double peak = 0;
      for (size_t z = 1; z < mc[bin].sum.size(); ++z) peak = std::max(peak, mc[bin].Mean(z));
      for (size_t z = 1; z < mc[bin].sum.size(); ++z) {
        const double error = std::hypot(mc[bin].Error(z), gen[bin].Error(z));
        EXPECT_NEAR(gen[bin].Mean(z), mc[bin].Mean(z), 4 * error + 0.03 * peak)
            << "layer " << z - 1;
      }
    }
  }
}

TEST_F(BaselineSamplerTest, SpotsMatchTheNumberOfHitCellsAndTheTemplateDoesNot) {
  const std::vector<BinStats> mc = Stats(*test_);
  const showers::ShowerSet spots = Fitted(BaselineKind::kSpots).Sample(test_->energy_gev, 5);
  const showers::ShowerSet plain = Fitted(BaselineKind::kTemplate).Sample(test_->energy_gev, 5);
  const std::vector<BinStats> with_spots = Stats(spots), without = Stats(plain);
  double data_hits = 0, spot_hits = 0, plain_hits = 0;
  for (int bin = 0; bin < 4; ++bin) {
    data_hits += mc[bin].nonzero;
    spot_hits += with_spots[bin].nonzero;
    plain_hits += without[bin].nonzero;
  }
  const double n = static_cast<double>(test_->events());
  EXPECT_NEAR(spot_hits / data_hits, 1.0, 0.25)
      << "data " << data_hits / n << " spots " << spot_hits / n << " hit cells per shower";
  EXPECT_GT(plain_hits, 2 * data_hits)
      << "data " << data_hits / n << " template " << plain_hits / n << " hit cells per shower";
  EXPECT_GT(Fitted(BaselineKind::kSpots).parameters().spot_gev, 0);
  EXPECT_EQ(Fitted(BaselineKind::kTemplate).parameters().spot_gev, 0);

  // Smeared spots: the same spot energy and hit cells (an exponential deposit is never 0), but
  // continuous cells where the plain spots are whole multiples of the spot energy.
  const BaselineSampler smeared_fit = Fitted(BaselineKind::kSpotsSmeared);
  EXPECT_EQ(smeared_fit.parameters().spot_gev, Fitted(BaselineKind::kSpots).parameters().spot_gev);
  const showers::ShowerSet smeared = smeared_fit.Sample(test_->energy_gev, 5);
  const double s = smeared_fit.parameters().spot_gev;
  int64_t hits = 0, whole = 0, plain_whole = 0, plain_count = 0;
  for (size_t i = 0; i < smeared.cells.size(); ++i) {
    const double v = smeared.cells[i], w = spots.cells[i];
    hits += v > 0;
    whole += v > 0 && std::fabs(v / s - std::round(v / s)) < 1e-3;
    plain_count += w > 0;
    plain_whole += w > 0 && std::fabs(w / s - std::round(w / s)) < 1e-3;
  }
  // The same expected number of hit cells (the Gamma draws shift the stream, so not cell for cell):
  // about 628,000 here, a Poisson spread of 0.13%.
  EXPECT_NEAR(static_cast<double>(hits) / static_cast<double>(plain_count), 1.0, 0.01);
  EXPECT_EQ(plain_whole, plain_count);
  EXPECT_LT(whole, hits / 100);
}

// Determinism needs no statistics: a fit on 200 showers (the suite's 1,600 cost a minute and a half
// under the sanitizers, which run this test and not the statistical ones).
TEST(BaselineSamplerDeterminismTest, DeterministicBySeedAndIndependentOfTheBatch) {
  const showers::ShowerSet train = Toy(200, 1);
  const auto fitted = [&train] {
    BaselineFitOptions options;
    options.kind = BaselineKind::kSpots;
    absl::StatusOr<BaselineSampler> sampler = BaselineSampler::Fit(train, {}, options);
    EXPECT_TRUE(sampler.ok()) << sampler.status();
    return *std::move(sampler);
  };
  const BaselineSampler sampler = fitted();
  const std::vector<float> energies = {15, 80, 150};
  const showers::ShowerSet a = sampler.Sample(energies, 9);
  EXPECT_EQ(sampler.Sample(energies, 9).cells, a.cells);
  EXPECT_NE(sampler.Sample(energies, 10).cells, a.cells);
  // Shower 2 alone is shower 2 of the batch.
  std::vector<float> lone(static_cast<size_t>(sampler.cells()));
  sampler.Draw(150, 9, 2, lone.data());
  EXPECT_TRUE(std::equal(lone.begin(), lone.end(), a.event(2)));
  for (float x : a.cells) ASSERT_TRUE(std::isfinite(x) && x >= 0);
  // Fitting twice gives the same baseline.
  const BaselineSampler again = fitted();
  EXPECT_EQ(again.parameters().a, sampler.parameters().a);
  EXPECT_EQ(again.parameters().modes, sampler.parameters().modes);
  EXPECT_EQ(again.parameters().spot_gev, sampler.parameters().spot_gev);
}

// DrawSpots per cell: Poisson(mu / s) spots, each depositing s (shape 0) or Gamma(a, s / a)
// (shape a). 20,000 cells of mu = 0.05 GeV and s = 0.01 GeV: the mean stays 0.05 (standard error
// sqrt(s mu (1 + 1/a) / 20,000) = 0.00022 for a = 1), the variance is s mu (1 + 1/a) (0.0005
// whole, 0.001 exponential), the empty fraction exp(-5) either way, and only shape 0 gives whole
// spots. The same (seed, index) draws the same cells.
TEST(BaselineSpotsTest, SpotShapeSmearsEachSpotAndKeepsTheMean) {
  constexpr int64_t kCells = 20000;
  for (double shape : {0.0, 1.0}) {
    std::vector<float> cells(kCells, 0.05f);
    DrawSpots(0.01, /*seed=*/3, /*index=*/4, cells.data(), kCells, shape);
    double sum = 0, sum2 = 0, empty = 0, whole = 0;
    for (float v : cells) {
      sum += v;
      sum2 += static_cast<double>(v) * v;
      empty += v == 0;
      whole += v > 0 && std::fabs(v / 0.01 - std::round(v / 0.01)) < 1e-3;
    }
    const double mean = sum / kCells, var = sum2 / kCells - mean * mean;
    SCOPED_TRACE(shape);
    EXPECT_NEAR(mean, 0.05, 4 * 0.00022);
    EXPECT_NEAR(var, 0.01 * 0.05 * (shape > 0 ? 1 + 1 / shape : 1), 0.00008);
    EXPECT_NEAR(empty / kCells, std::exp(-5.0), 0.0025);
    if (shape > 0) {
      EXPECT_LT(whole / (kCells - empty), 0.01);
    } else {
      EXPECT_EQ(whole, kCells - empty);
    }
    std::vector<float> again(kCells, 0.05f);
    DrawSpots(0.01, 3, 4, again.data(), kCells, shape);
    EXPECT_EQ(again, cells);
  }
}

TEST(BaselineSamplerRefusalTest, EmptyOrDegenerateDataIsInvalidArgument) {
  BaselineFitOptions options;
  showers::ShowerSet empty;
  EXPECT_EQ(BaselineSampler::Fit(empty, {}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  showers::ShowerSet data = Toy(4, 3);
  showers::ShowerSet no_energy = data;
  std::fill(no_energy.energy_gev.begin(), no_energy.energy_gev.end(), 0.0f);
  EXPECT_EQ(BaselineSampler::Fit(no_energy, {}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  showers::ShowerSet no_cells = data;
  std::fill(no_cells.cells.begin(), no_cells.cells.end(), 0.0f);
  EXPECT_EQ(BaselineSampler::Fit(no_cells, {}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  showers::ShowerSet short_cells = data;
  short_cells.cells.resize(100);
  EXPECT_EQ(BaselineSampler::Fit(short_cells, {}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BaselineSampler::Fit(data, {7}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.modes = kMaxBaselineModes + 1;
  EXPECT_EQ(BaselineSampler::Fit(data, {}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  // One beam energy: no slope, and still a baseline.
  showers::ShowerSet one_energy = data;
  std::fill(one_energy.energy_gev.begin(), one_energy.energy_gev.end(), 50.0f);
  options.modes = 2;
  absl::StatusOr<BaselineSampler> flat = BaselineSampler::Fit(one_energy, {}, options);
  ASSERT_TRUE(flat.ok()) << flat.status();
  for (float b : flat->parameters().b) ASSERT_EQ(b, 0.0f);
}

TEST(BaselineSamplerRefusalTest, PresetNamesRoundTrip) {
  for (BaselineKind kind :
       {BaselineKind::kTemplate, BaselineKind::kSpots, BaselineKind::kSpotsSmeared}) {
    EXPECT_EQ(BaselineKindOfPreset(BaselinePresetName(kind)), kind);
  }
  EXPECT_EQ(BaselinePresetName(BaselineKind::kSpotsSmeared), "baseline-spots-smeared");
  EXPECT_FALSE(BaselineKindOfPreset("tiny").has_value());
  EXPECT_FALSE(BaselineKindOfPreset("baseline").has_value());
}

}  // namespace
}  // namespace gantry::baseline
