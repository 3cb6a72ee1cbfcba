// Tests of workers/physics/validation on toy Monte Carlo samples. Thresholds come from the
// statistics (the report's own "_null" floors, derived from per-event spreads) and from the physics
// of the distortion, never from earlier runs.
#include "workers/physics/validation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "showers/toy_mc.h"

namespace gantry::physics {
namespace {

using showers::Layout;
using showers::ShowerSet;
using showers::ToyMcConfig;

constexpr double kPi = 3.14159265358979323846;

ShowerSet Toy(uint64_t seed, double escale = 1.0, double dscale = 1.0,
              Layout layout = Layout::kFixedAngle3DGan, int64_t events = 400) {
  ToyMcConfig c;
  c.layout = layout;
  c.events = events;
  c.seed = seed;
  c.energy_min_gev = 50;
  c.energy_max_gev = 250;
  c.energy_scale = escale;
  c.depth_scale = dscale;
  c.threads = 2;
  absl::StatusOr<ShowerSet> s = showers::SimulateToyMc(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

ValidationOptions FourBins() {
  ValidationOptions o;
  o.energy_edges_gev = {50, 100, 150, 200, 250};
  o.field_metrics = false;  // tests/physics/field_metrics_test.cc tests those
  return o;
}

// The reference sample, shared by the tests (simulated once).
const ShowerSet& Reference() {
  static const ShowerSet* s = new ShowerSet(Toy(1));
  return *s;
}

ValidationReport Validate(const ShowerSet& generated, const ValidationOptions& o = FourBins()) {
  absl::StatusOr<ValidationReport> r = ValidateShowers(Reference(), generated, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : ValidationReport{};
}

double M(const ValidationReport& r, const std::string& key) {
  auto it = r.metrics.find(key);
  EXPECT_NE(it, r.metrics.end()) << key;
  return it == r.metrics.end() ? NAN : it->second;
}

double BinMetric(const BinMetrics& b, const std::string& key) {
  auto it = b.metrics.find(key);
  EXPECT_NE(it, b.metrics.end()) << key;
  return it == b.metrics.end() ? NAN : it->second;
}

TEST(SeparationPowerTest, KnownValues) {
  EXPECT_DOUBLE_EQ(SeparationPower({1, 2, 3}, {2, 4, 6}), 0.0);  // same shape, normalised
  EXPECT_DOUBLE_EQ(SeparationPower({1, 0}, {0, 5}), 1.0);        // disjoint
  // 1/2 [ (1 - 0.5)^2 / 1.5 + (0 - 0.5)^2 / 0.5 ] = 1/3
  EXPECT_NEAR(SeparationPower({1, 0}, {1, 1}), 1.0 / 3.0, 1e-12);
}

// An independent sample of the same settings differs only by statistics. Each metric is a mean of
// |difference| terms whose expectation for equal distributions is the report's _null value;
// averaged over bins/slices its spread is well below the mean, so 2.5 x null is a >99% bound. The
// floors themselves must be small: a few per mille for the SF (per-event SF spread ~5% over ~100
// events).
TEST(ValidationTest, IndependentSampleOfSameSettingsScoresAtTheStatisticalFloor) {
  const ValidationReport r = Validate(Toy(2));
  ASSERT_EQ(M(r, "bins_used"), 4);
  EXPECT_LT(M(r, "sf_mre_null"), 0.01);
  EXPECT_LT(M(r, "pos_null"), 0.02);
  for (const char* key : {"sf_mre", "eprof", "pos", "fom", "separation_power", "eprof_longitudinal",
                          "eprof_transverse", "sf_relative_error_max", "shower_max_relative_error",
                          "centroid_depth_relative_error"}) {
    EXPECT_LT(M(r, key), 2.5 * M(r, std::string(key) + "_null")) << key;
  }
  EXPECT_EQ(M(r, "invalid_cells_generated"), 0);
  EXPECT_NEAR(M(r, "fom"), M(r, "pos") + M(r, "eprof"), 1e-12);  // fixed angle: no angle term
  EXPECT_EQ(r.metrics.count("ang"), 0u);
}

// energy_scale 1.1 multiplies every cell by 1.1: the SF and every profile slice move by exactly
// 10%, a bounded relative error |a - b| / max(a, b) of 0.1 / 1.1 plus statistics, while the
// moments, ratios of sums, do not move at all. The profile error is energy weighted, so its noise
// is dominated by the bin's total energy, common to all slices: it does not average down over
// slices and the bound is in units of its null (sqrt(2/pi) sigma; 2.5 nulls are ~3 sigma).
TEST(ValidationTest, EnergyScaleShiftGivesTenPercentMre) {
  const ValidationReport r = Validate(Toy(2, 1.1));
  constexpr double kShift = 0.1 / 1.1;
  EXPECT_NEAR(M(r, "sf_mre"), kShift, 3.0 * M(r, "sf_mre_null") + 0.002);
  EXPECT_NEAR(M(r, "sf_relative_error_max"), kShift, 4.0 * M(r, "sf_relative_error_max_null"));
  EXPECT_NEAR(M(r, "eprof"), kShift, 2.5 * M(r, "eprof_null"));
  EXPECT_NEAR(M(r, "eprof_longitudinal"), kShift, 2.5 * M(r, "eprof_longitudinal_null"));
  EXPECT_NEAR(M(r, "eprof_transverse"), kShift, 2.5 * M(r, "eprof_transverse_null"));
  EXPECT_LT(M(r, "shower_max_relative_error"), 2.5 * M(r, "shower_max_relative_error_null"));
  EXPECT_LT(M(r, "centroid_depth_relative_error"),
            2.5 * M(r, "centroid_depth_relative_error_null"));
  EXPECT_LT(M(r, "pos"), 2.5 * M(r, "pos_null"));
  for (const BinMetrics& b : r.bins) {
    // The per-event raw SF spread is ~5% (thin/thick sampling and leakage), the shift 10%: two
    // Gaussians 2 sigma apart have S = 0.55 (numerical integral; 0.38 at 1.5 sigma, the bound used,
    // which leaves room for a spread up to 6.7% and for histogram noise).
    EXPECT_GT(BinMetric(b, "separation_power/sampling_fraction"), 0.38);
    EXPECT_GT(BinMetric(b, "separation_power/sampling_fraction"),
              2.5 * BinMetric(b, "separation_power/sampling_fraction_null"));
  }
}

// depth_scale 1.2 stretches the longitudinal profile. The depth centroid (~14 layers at these
// energies) moves by up to 20% (less: leakage at 23 X0 and the back layers, which hold 1.37 X0 each
// against 0.685 in front, so depth in layer units grows slower than in X0); the early layers lose a
// factor ~1.2^a (a ~ 5) and the late ones gain, so the z profile differs by tens of per cent per
// layer. The raw sum drops too: more energy goes to the half-sampled back layers and out of the
// back. With the GFlash Gamma profile at 100 GeV (a ~ 5.1, T ~ 8 X0) the front 11.6 X0 hold ~64% of
// the energy and the visible sum is ~0.64 + 0.34/2 = 0.81 of the front-equivalent; stretched, ~0.48
// + 0.47/2 = 0.72: an SF change of ~12%, between 6% and 20% over 50-250 GeV.
TEST(ValidationTest, StretchedProfileScoresClearlyWorse) {
  const ValidationReport same = Validate(Toy(2));
  const ValidationReport r = Validate(Toy(2, 1.0, 1.2));
  for (const BinMetrics& b : r.bins) {
    EXPECT_GT(BinMetric(b, "pos_z_mu1"), 0.08);
    EXPECT_LT(BinMetric(b, "pos_z_mu1"), 0.2);
    EXPECT_GT(BinMetric(b, "pos_z_mu2"), 5 * BinMetric(b, "pos_z_mu2_null"));
    EXPECT_GT(BinMetric(b, "eprof_z"), 0.2);
  }
  EXPECT_GT(M(r, "pos"), 5 * M(r, "pos_null"));
  EXPECT_GT(M(r, "eprof"), 3 * M(r, "eprof_null"));
  EXPECT_GT(M(r, "fom"), 2 * M(same, "fom"));
  // The centroid moves by 8-20% (bounded error: 0.08/1.08 to 0.2/1.2); the longitudinal profile
  // is far off, the transverse ones only by the SF change.
  EXPECT_GT(M(r, "centroid_depth_relative_error"), 0.08 / 1.08);
  EXPECT_LT(M(r, "centroid_depth_relative_error"), 0.2 / 1.2);
  EXPECT_GT(M(r, "shower_max_relative_error"), 5 * M(r, "shower_max_relative_error_null"));
  EXPECT_GT(M(r, "eprof_longitudinal"), 0.2);
  EXPECT_GT(M(r, "eprof_longitudinal"), M(r, "eprof_transverse"));
  EXPECT_GT(M(r, "sf_mre"), 0.06);
  EXPECT_LT(M(r, "sf_mre"), 0.2);
}

TEST(ValidationTest, HistogramsAreKeptAsConsistentData) {
  const ValidationReport r = Validate(Toy(2));
  int profiles_z = 0;
  bool spectrum = false, hits = false, sf_curve = false, sf_vs_energy = false;
  for (const Histogram& h : r.histograms) {
    ASSERT_EQ(h.reference.size(), h.generated.size()) << h.name;
    if (h.edges.empty()) {
      ASSERT_EQ(h.x.size(), h.reference.size()) << h.name;  // a point series
    } else {
      ASSERT_EQ(h.edges.size(), h.reference.size() + 1) << h.name;
      ASSERT_TRUE(h.x.empty()) << h.name;
    }
    if (!h.reference_error.empty() || !h.generated_error.empty()) {
      ASSERT_EQ(h.reference_error.size(), h.reference.size()) << h.name;
      ASSERT_EQ(h.generated_error.size(), h.generated.size()) << h.name;
    }
    if (h.name.rfind("profile_", 0) == 0 || h.name == "sampling_fraction" ||
        h.name == "feature/total_energy" || h.name == "feature/hits") {
      ASSERT_EQ(h.reference_error.size(), h.reference.size()) << h.name;
    }
    if (h.name == "profile_z") {
      ++profiles_z;
      ASSERT_GE(h.energy_bin, 0);
      ASSERT_EQ(h.reference.size(), 25u);
      // The mean z profile sums to the mean total energy: SF x mean primary energy of the bin.
      const BinMetrics& b = r.bins[h.energy_bin];
      const double total = std::accumulate(h.reference.begin(), h.reference.end(), 0.0);
      EXPECT_GT(total, BinMetric(b, "sf_reference") * b.energy_lo_gev);
      EXPECT_LT(total, BinMetric(b, "sf_reference") * b.energy_hi_gev);
      // Standard error of the mean of ~100 events: below the mean, above 1/100 of it at the peak.
      const size_t peak =
          std::max_element(h.reference.begin(), h.reference.end()) - h.reference.begin();
      EXPECT_LT(h.reference_error[peak], 0.2 * h.reference[peak]);
      EXPECT_GT(h.reference_error[peak], 0.01 * h.reference[peak]);
    }
    if (h.name == "feature/total_energy") {
      // Poisson: sqrt(f / N) for a normalised count f of N events.
      const double n = static_cast<double>(r.bins[h.energy_bin].reference_events);
      for (size_t i = 0; i < h.reference.size(); ++i) {
        EXPECT_NEAR(h.reference_error[i], std::sqrt(h.reference[i] / n), 1e-12);
      }
    }
    if (h.name == "cell_energy") {
      spectrum = true;
      EXPECT_NEAR(std::accumulate(h.reference.begin(), h.reference.end(), 0.0), 1.0, 1e-9);
    }
    if (h.name == "feature/hits") hits = true;
    if (h.name == "sampling_fraction_per_bin") {
      sf_curve = true;
      EXPECT_EQ(h.energy_bin, -1);
      ASSERT_EQ(h.reference.size(), 4u);
      // The raw SF falls with energy (more leakage into the coarse back section).
      EXPECT_GT(h.reference.front(), h.reference.back());
    }
    if (h.name == "sampling_fraction_vs_energy") {
      sf_vs_energy = true;
      EXPECT_EQ(h.energy_bin, -1);
      EXPECT_EQ(h.x_label, "E_primary [GeV]");
      ASSERT_EQ(h.x.size(), 4u);
      for (size_t i = 0; i < 4; ++i) {
        EXPECT_NEAR(h.x[i], 75.0 + 50.0 * i, 1e-9);  // bin centres of 50-100, ..., 200-250
        EXPECT_DOUBLE_EQ(h.reference[i], BinMetric(r.bins[i], "sf_reference"));
        EXPECT_DOUBLE_EQ(h.generated[i], BinMetric(r.bins[i], "sf_generated"));
        // ~5% per-event spread over ~100 events: ~0.5% of the mean.
        EXPECT_GT(h.reference_error[i], 0.001 * h.reference[i]);
        EXPECT_LT(h.reference_error[i], 0.02 * h.reference[i]);
      }
    }
  }
  EXPECT_EQ(profiles_z, 4);
  EXPECT_TRUE(spectrum);
  EXPECT_TRUE(hits);
  EXPECT_TRUE(sf_curve);
  EXPECT_TRUE(sf_vs_energy);
}

// Variable angle: the measured angle of the toy follows its label to ~1-2 degrees, so ang (relative
// error) is a few per cent for both samples. Labels off by 0.15 rad give ang ~ 0.15 / 1.57 ~ 0.1.
TEST(ValidationTest, AngleErrorForVariableAngle) {
  const ShowerSet ref = Toy(3, 1.0, 1.0, Layout::kVariableAngle3DGan, 150);
  ShowerSet gen = Toy(4, 1.0, 1.0, Layout::kVariableAngle3DGan, 150);
  ValidationOptions o;
  o.field_metrics = false;
  o.energy_edges_gev = {50, 250};
  absl::StatusOr<ValidationReport> r = ValidateShowers(ref, gen, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(M(*r, "ang"), 0.05);
  EXPECT_NEAR(M(*r, "ang"), M(*r, "ang_reference"), 0.01);
  EXPECT_NEAR(M(*r, "fom"), M(*r, "pos") + M(*r, "eprof") + M(*r, "ang"), 1e-12);

  for (float& t : gen.theta_rad) t += 0.15f;
  absl::StatusOr<ValidationReport> wrong = ValidateShowers(ref, gen, o);
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  EXPECT_GT(M(*wrong, "ang"), M(*wrong, "ang_reference") + 0.05);

  // Angle bins of +-0.1 rad around 70, 90 and 110 degrees.
  o.theta_centres_rad = {70 * kPi / 180, 90 * kPi / 180, 110 * kPi / 180};
  absl::StatusOr<ValidationReport> binned = ValidateShowers(ref, ref, o);
  ASSERT_TRUE(binned.ok()) << binned.status();
  ASSERT_EQ(binned->bins.size(), 3u);
  for (const BinMetrics& b : binned->bins) {
    EXPECT_NEAR(b.theta_hi_rad - b.theta_lo_rad, 0.2, 1e-12);
    EXPECT_GT(b.reference_events, 10);      // 0.2 rad of a 1.05 rad range: ~19% of 150 events
    EXPECT_EQ(BinMetric(b, "eprof"), 0.0);  // a sample against itself
    EXPECT_EQ(BinMetric(b, "pos"), 0.0);
  }
}

TEST(ValidationTest, CaloChallengeAxesAndLayerFeatures) {
  ShowerSet s;
  s.layout = Layout::kCaloChallenge;
  s.shape = {45, 16, 9};
  const int64_t n = 20;
  s.cells.assign(n * s.cells_per_event(), 0.0f);
  for (int64_t e = 0; e < n; ++e) {
    s.energy_gev.push_back(10.0f + e);
    for (int64_t l = 0; l < 45; ++l) {
      for (int64_t r = 0; r < 9; ++r) {
        s.mutable_event(e)[(l * 16 + (e % 16)) * 9 + r] = 0.001f * (1 + (l * r + e) % 5);
      }
    }
  }
  ValidationOptions o;
  o.field_metrics = false;
  o.default_energy_bins = 2;
  absl::StatusOr<ValidationReport> r = ValidateShowers(s, s, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->bins.size(), 2u);
  EXPECT_EQ(BinMetric(r->bins[0], "eprof_layer"), 0.0);
  EXPECT_EQ(BinMetric(r->bins[0], "separation_power/layer_energy_44"), 0.0);
  EXPECT_EQ(r->metrics.count("ang"), 0u);
}

// The cell-energy spectrum bins log10(E_cell / GeV) from -6 to 2 in 40 bins of 0.2: each cell lands
// in floor((log10 E + 6) / 0.2), clamped to the first and last bin (subnormal and near-float-max
// deposits included).
TEST(ValidationTest, CellEnergySpectrumBins) {
  ShowerSet s;
  s.shape = {25, 25, 25};
  const std::vector<std::pair<float, int>> cells = {
      {1e-3f, 15},   {0.05f, 23},   {1.0f, 30},  {1.5e-6f, 0},  {2e-6f, 1},
      {1e-7f, 0},    {1e-44f, 0},   {99.0f, 39}, {1000.0f, 39}, {3e38f, 39},
      {0.0101f, 20}, {0.0099f, 19}, {0.2f, 26},  {6.4e-4f, 14}};
  s.energy_gev = {100.0f, 100.0f};
  s.cells.assign(2 * s.cells_per_event(), 0.0f);
  std::vector<double> expected(40, 0.0);
  for (size_t i = 0; i < cells.size(); ++i) {
    s.cells[i * 7] = s.cells[s.cells_per_event() + i * 7] = cells[i].first;
    expected[cells[i].second] += 1.0 / cells.size();
  }
  ValidationOptions o;
  o.field_metrics = false;
  o.energy_edges_gev = {50, 150};
  absl::StatusOr<ValidationReport> r = ValidateShowers(s, s, o);
  ASSERT_TRUE(r.ok()) << r.status();
  bool found = false;
  for (const Histogram& h : r->histograms) {
    if (h.name != "cell_energy") continue;
    found = true;
    ASSERT_EQ(h.reference.size(), 40u);
    for (int b = 0; b < 40; ++b) EXPECT_NEAR(h.reference[b], expected[b], 1e-12) << "bin " << b;
  }
  EXPECT_TRUE(found);
}

TEST(ValidationTest, RejectsBadInputs) {
  const ShowerSet fixed = Toy(5, 1.0, 1.0, Layout::kFixedAngle3DGan, 4);
  const ShowerSet variable = Toy(5, 1.0, 1.0, Layout::kVariableAngle3DGan, 4);
  ValidationOptions o;
  o.field_metrics = false;
  EXPECT_EQ(ValidateShowers(fixed, variable, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  ShowerSet empty = fixed;
  empty.cells.clear();
  empty.energy_gev.clear();
  EXPECT_EQ(ValidateShowers(fixed, empty, o).status().code(), absl::StatusCode::kInvalidArgument);
  ValidationOptions angles;
  angles.field_metrics = false;
  angles.theta_centres_rad = {1.5};
  EXPECT_EQ(ValidateShowers(fixed, fixed, angles).status().code(),
            absl::StatusCode::kInvalidArgument);
  ValidationOptions far;
  far.field_metrics = false;
  far.energy_centres_gev = {1000};
  absl::Status st = ValidateShowers(fixed, fixed, far).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find("995-1005 GeV"), std::string::npos) << st;
}

// The report carries the field metrics (field_metrics.h) with floors from the second reference
// when one is given, and says so (field_events 0) when the samples are too small for them.
TEST(ValidationTest, ReportCarriesTheFieldMetricsWithTheirFloors) {
  ValidationOptions o;
  o.field.cells_classifier = false;
  o.field.features_classifier.seeds = 1;
  const ShowerSet generated = Toy(2), second = Toy(3);
  absl::StatusOr<ValidationReport> r = ValidateShowers(Reference(), generated, o, &second);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->metrics.at("field_events"),
            std::min({Reference().events(), generated.events(), second.events()}));
  for (const char* key : {"auc_features", "auc_features_floor", "fpd", "fpd_floor", "sep_mean",
                          "sep_mean_floor", "nonzero_cells_ratio"}) {
    EXPECT_EQ(r->metrics.count(key), 1u) << key;
  }
  // The server stores a validation point of at most 128 metrics named [A-Za-z0-9_.-]{1,64}
  // (server/requests/worker_requests.h): the whole report must fit.
  EXPECT_LE(r->metrics.size(), 128u);
  for (const auto& [key, value] : r->metrics) {
    EXPECT_TRUE(!key.empty() && key.size() <= 64 &&
                key.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789_.-") == std::string::npos)
        << key;
  }
  ShowerSet few = Toy(4);
  few.cells.resize(static_cast<size_t>(5 * few.cells_per_event()));
  few.energy_gev.resize(5);
  absl::StatusOr<ValidationReport> small = ValidateShowers(Reference(), few, o);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->metrics.at("field_events"), 0);
  EXPECT_EQ(small->metrics.count("auc_features"), 0u);
  // A second reference of another shape is refused, naming it.
  ShowerSet other = second;
  other.shape = {25, 25, 5};
  other.cells.resize(static_cast<size_t>(other.events() * 25 * 25 * 5));
  absl::StatusOr<ValidationReport> bad = ValidateShowers(Reference(), generated, o, &other);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("second reference"), std::string::npos);
}

}  // namespace
}  // namespace gantry::physics
