// Tests of the hard variant of showers/toy_mc (ToyMcConfig::hard, spec key hard=1; reference
// section H): the option, determinism, and that each added fluctuation shows up in the moment it
// should, measured against the standard toy on the same seed. Bounds come from the constants in
// toy_mc.h and the sampling errors of the samples, not from running the code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "showers/toy_mc.h"

namespace gantry::showers {
namespace {

constexpr int kN = 25;  // the fixed-angle grid, 25 x 25 x 25, z fastest
// The documented sizes of the effects (reference section H), written out so that a change of a
// constant in toy_mc.h has to come with a change here.
constexpr double kJitterVariance = 1.0 / 12;    // U(-1/2, 1/2) cell
constexpr double kLateralSigma = 0.15;          // ln of the lateral scale
constexpr double kStartVariance = 81.0 / 49.0;  // exponential start, mean (and sd) 9/7 X0

ShowerSet Simulate(const ToyMcConfig& c) {
  absl::StatusOr<ShowerSet> s = SimulateToyMc(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : ShowerSet{};
}

// What the moments below need of one shower, all in cell units (index + 0.5) or X0.
struct Shower {
  double total = 0, sf = 0;
  double depth = 0;  // energy-weighted depth of the layer centres, X0
  int max_layer = 0;
  double front_x = 0, front_y = 0;  // centroid of layers 0-7; NaN when they are empty
  double back_x = 0, back_y = 0;    // centroid of layers 14-24; NaN when they are empty
  double width = 0;                 // rms distance from the centroid within 5 cells, x and y pooled
  std::vector<double> res_x,
      res_y;  // layer centroid minus shower centroid, layers 2-15 (NaN: empty)
};

Shower Summarise(const ShowerSet& s, int64_t i) {
  const float* ev = s.event(i);
  std::vector<double> layer(kN, 0.0), px(kN * kN, 0.0), py(kN * kN, 0.0);  // [x or y][z]
  for (int x = 0; x < kN; ++x) {
    for (int y = 0; y < kN; ++y) {
      for (int z = 0; z < kN; ++z) {
        const double v = ev[(x * kN + y) * kN + z];
        layer[z] += v;
        px[x * kN + z] += v;
        py[y * kN + z] += v;
      }
    }
  }
  Shower out;
  auto centroid = [&](const std::vector<double>& p, int z_lo, int z_hi) {
    double w = 0, wc = 0;
    for (int c = 0; c < kN; ++c) {
      for (int z = z_lo; z < z_hi; ++z) {
        w += p[c * kN + z];
        wc += p[c * kN + z] * (c + 0.5);
      }
    }
    return w > 0 ? wc / w : std::numeric_limits<double>::quiet_NaN();
  };
  for (int z = 0; z < kN; ++z) {
    out.total += layer[z];
    out.depth += layer[z] * LayerCentreX0(z);
  }
  out.depth /= out.total;
  out.sf = out.total / s.energy_gev[i];
  out.max_layer = static_cast<int>(std::max_element(layer.begin(), layer.end()) - layer.begin());
  const double cx = centroid(px, 0, kN), cy = centroid(py, 0, kN);
  out.front_x = centroid(px, 0, 8);
  out.front_y = centroid(py, 0, 8);
  out.back_x = centroid(px, 14, kN);
  out.back_y = centroid(py, 14, kN);
  double w = 0, w2 = 0;
  for (int c = 0; c < kN; ++c) {
    for (const auto& [p, centre] : {std::pair{&px, cx}, std::pair{&py, cy}}) {
      const double d = c + 0.5 - centre;
      if (std::fabs(d) > 5.0) continue;
      for (int z = 0; z < kN; ++z) {
        w += (*p)[c * kN + z];
        w2 += (*p)[c * kN + z] * d * d;
      }
    }
  }
  out.width = std::sqrt(w2 / w);
  for (int z = 2; z < 16; ++z) {
    out.res_x.push_back(centroid(px, z, z + 1) - cx);
    out.res_y.push_back(centroid(py, z, z + 1) - cy);
  }
  return out;
}

// Variance of `v` (NaN entries skipped) and the standard error of that variance, sqrt((m4 -
// var^2) / n).
struct Spread {
  double var = 0, error = 0;
};
Spread SpreadOf(const std::vector<double>& v) {
  double n = 0, mean = 0;
  for (double x : v) {
    if (std::isnan(x)) continue;
    n += 1;
    mean += x;
  }
  mean /= n;
  double m2 = 0, m4 = 0;
  for (double x : v) {
    if (std::isnan(x)) continue;
    const double d = (x - mean) * (x - mean);
    m2 += d / n;
    m4 += d * d / n;
  }
  return {m2, std::sqrt((m4 - m2 * m2) / n)};
}

// Covariance of the pairs (a_i, b_i) (pairs with a NaN skipped) and its standard error,
// sqrt(var((a - <a>) (b - <b>)) / n).
Spread CovarianceOf(const std::vector<double>& a, const std::vector<double>& b) {
  double n = 0, ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) continue;
    n += 1;
    ma += a[i];
    mb += b[i];
  }
  ma /= n;
  mb /= n;
  double c = 0, c2 = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) continue;
    const double p = (a[i] - ma) * (b[i] - mb);
    c += p / n;
    c2 += p * p / n;
  }
  return {c, std::sqrt((c2 - c * c) / n)};
}

// 1,000 showers at 100 GeV from the standard and the hard toy, same seed, summarised once.
class ToyMcHardMomentsTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (bool hard : {false, true}) {
      ToyMcConfig c;
      c.events = 1000;
      c.energy_min_gev = c.energy_max_gev = 100.0;
      c.seed = 21;
      c.threads = 2;
      c.hard = hard;
      const ShowerSet s = Simulate(c);
      std::vector<Shower>& out = hard ? *hard_ : *standard_;
      for (int64_t i = 0; i < s.events(); ++i) out.push_back(Summarise(s, i));
      (hard ? hard_cells_ : standard_cells_) = new std::vector<float>(s.cells);
    }
  }
  template <typename F>
  static std::vector<double> Each(const std::vector<Shower>& showers, F f) {
    std::vector<double> v;
    for (const Shower& s : showers) f(s, &v);
    return v;
  }
  static inline std::vector<Shower>* standard_ = new std::vector<Shower>();
  static inline std::vector<Shower>* hard_ = new std::vector<Shower>();
  static inline std::vector<float>* standard_cells_ = nullptr;
  static inline std::vector<float>* hard_cells_ = nullptr;
};

TEST(ToyMcHardSpecTest, HardParsesAndIsInTheCanonicalSpecOnlyWhenOn) {
  absl::StatusOr<ToyMcConfig> on = ParseToyMcSpec("toymc:layout=51,emin=2,hard=1");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->hard);
  EXPECT_EQ(on->energy_min_gev, 2.0);
  const std::string spec = FormatToyMcSpec(*on);
  EXPECT_EQ(spec.substr(spec.size() - 7), ",hard=1") << spec;
  absl::StatusOr<ToyMcConfig> back = ParseToyMcSpec(spec);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->hard);
  EXPECT_EQ(FormatToyMcSpec(*back), spec);

  absl::StatusOr<ToyMcConfig> off = ParseToyMcSpec("toymc:hard=0");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->hard);
  EXPECT_EQ(FormatToyMcSpec(*off), FormatToyMcSpec(ToyMcConfig{})) << "same cache key as before";
  EXPECT_EQ(FormatToyMcSpec(*off).find("hard"), std::string::npos);
  for (const char* bad : {"toymc:hard=2", "toymc:hard=yes", "toymc:hard="}) {
    absl::StatusOr<ToyMcConfig> r = ParseToyMcSpec(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("'hard'"), std::string::npos) << r.status();
  }
}

TEST(ToyMcHardTest, OffIsTheStandardToyAndOnIsNot) {
  ToyMcConfig standard;
  standard.events = 6;
  absl::StatusOr<ToyMcConfig> off = ParseToyMcSpec("toymc:events=6,hard=0");
  ASSERT_TRUE(off.ok());
  const ShowerSet a = Simulate(standard), b = Simulate(*off);
  EXPECT_EQ(a.cells, b.cells);
  EXPECT_EQ(a.energy_gev, b.energy_gev);
  standard.hard = true;
  const ShowerSet h = Simulate(standard);
  EXPECT_EQ(h.energy_gev, a.energy_gev) << "the primary is drawn first either way";
  EXPECT_NE(h.cells, a.cells);
}

TEST(ToyMcHardTest, DeterministicBySeedNotByThreadsAndSliceable) {
  for (Layout layout : {Layout::kFixedAngle3DGan, Layout::kVariableAngle3DGan}) {
    ToyMcConfig c;
    c.layout = layout;
    c.events = 9;
    c.seed = 42;
    c.energy_min_gev = 2.0;
    c.hard = true;
    c.threads = 1;
    const ShowerSet one = Simulate(c);
    c.threads = 3;
    const ShowerSet three = Simulate(c);
    EXPECT_EQ(one.cells, three.cells);
    EXPECT_EQ(one.theta_rad, three.theta_rad);
    absl::StatusOr<ShowerSet> slice = SimulateToyMcRange(c, 3, 4);
    ASSERT_TRUE(slice.ok());
    EXPECT_TRUE(std::equal(slice->cells.begin(), slice->cells.end(), one.event(3)));
    EXPECT_EQ(slice->energy_gev[0], one.energy_gev[3]);
  }
}

TEST_F(ToyMcHardMomentsTest, ImpactJitterMovesFrontAndBackCentroidsTogether) {
  // The jitter is the one thing layers 0-7 and 14-24 of a shower share (no sub-shower spans both:
  // at most 6 layers; spots are independent), so it is the covariance of their centroids: 1/12
  // cell^2 if the binned centroid followed the axis. Binning pulls it towards the cell centre: the
  // core (radius ~0.2 cell at the maximum, most of the energy) barely leaves the central cell, the
  // tail follows the axis, so between a third and all of it.
  auto front = [](const Shower& s, std::vector<double>* v) {
    v->push_back(s.front_x);
    v->push_back(s.front_y);
  };
  auto back = [](const Shower& s, std::vector<double>* v) {
    v->push_back(s.back_x);
    v->push_back(s.back_y);
  };
  const Spread h = CovarianceOf(Each(*hard_, front), Each(*hard_, back));
  const Spread s = CovarianceOf(Each(*standard_, front), Each(*standard_, back));
  EXPECT_LT(std::fabs(s.var), 4 * s.error) << "the standard toy's axis is fixed";
  EXPECT_GT(h.var, kJitterVariance / 3 - 4 * h.error) << h.var << " vs " << s.var;
  EXPECT_LT(h.var, kJitterVariance + 4 * h.error) << h.var << " vs " << s.var;
  // And the front centroid spreads by about a cell over sqrt(12) more than the standard's.
  const Spread hf = SpreadOf(Each(*hard_, front)), sf = SpreadOf(Each(*standard_, front));
  EXPECT_GT(hf.var - sf.var, kJitterVariance / 2) << hf.var << " vs " << sf.var;
}

TEST_F(ToyMcHardMomentsTest, LateralScaleSpreadsTheWidth) {
  auto log_width = [](const Shower& s, std::vector<double>* v) { v->push_back(std::log(s.width)); };
  const Spread h = SpreadOf(Each(*hard_, log_width)), s = SpreadOf(Each(*standard_, log_width));
  // The lognormal scale adds kLateralScaleSigma^2 to var(ln R). The width measured within 5 cells
  // follows R with a slope above 1/2 (binning and the cut flatten it), and the other hard effects
  // (the jitter's binning, sub-showers) add about 0.05 in quadrature.
  const double excess = std::sqrt(std::max(0.0, h.var - s.var));
  const double error = std::hypot(h.error, s.error) / (2 * std::max(excess, 1e-3));
  EXPECT_GT(excess, 0.5 * kLateralSigma - 4 * error) << h.var << " vs " << s.var;
  EXPECT_LT(excess, std::hypot(kLateralSigma, 0.1) + 4 * error);
}

TEST_F(ToyMcHardMomentsTest, StartDepthSpreadsTheShowerDepth) {
  auto depth = [](const Shower& s, std::vector<double>* v) { v->push_back(s.depth); };
  auto max_depth = [](const Shower& s, std::vector<double>* v) {
    v->push_back(LayerCentreX0(s.max_layer));
  };
  const Spread h = SpreadOf(Each(*hard_, depth)), s = SpreadOf(Each(*standard_, depth));
  // The exponential start adds its variance (9/7 X0)^2 to every spot's depth; leakage out of the
  // back and the shortened T (with it, T's own spread) take some of it back.
  const double start_var = kStartVariance;
  const double excess = h.var - s.var, error = std::hypot(h.error, s.error);
  EXPECT_GT(excess, 0.5 * start_var - 4 * error) << h.var << " vs " << s.var;
  EXPECT_LT(excess, start_var + 4 * error) << h.var << " vs " << s.var;
  const Spread hm = SpreadOf(Each(*hard_, max_depth)), sm = SpreadOf(Each(*standard_, max_depth));
  EXPECT_GT(hm.var - sm.var, 0.5 * start_var - 4 * std::hypot(hm.error, sm.error))
      << "shower maximum " << hm.var << " vs " << sm.var;
}

TEST_F(ToyMcHardMomentsTest, SubShowersCorrelateConsecutiveLayers) {
  // Pooled lag-1 correlation of the per-layer centroid residuals (x and y, layers 2-15). The
  // shower's own centroid is subtracted, so the jitter and the axis drop out.
  auto lag1 = [](const std::vector<Shower>& showers) {
    double n = 0, sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (const Shower& s : showers) {
      for (const std::vector<double>* r : {&s.res_x, &s.res_y}) {
        for (size_t l = 0; l + 1 < r->size(); ++l) {
          const double a = (*r)[l], b = (*r)[l + 1];
          if (std::isnan(a) || std::isnan(b)) continue;
          n += 1;
          sa += a;
          sb += b;
          saa += a * a;
          sbb += b * b;
          sab += a * b;
        }
      }
    }
    const double cov = sab / n - sa * sb / n / n;
    return cov / std::sqrt((saa / n - sa * sa / n / n) * (sbb / n - sb * sb / n / n));
  };
  const double standard = lag1(*standard_), hard = lag1(*hard_);
  // 1000 showers x 2 axes x 13 pairs: a correlation's standard error is below 0.01. Independent
  // spots leave only the small negative correlation from subtracting the shower's centroid.
  EXPECT_LT(std::fabs(standard), 0.05);
  EXPECT_GT(hard - standard, 0.15) << hard << " vs " << standard;
}

TEST_F(ToyMcHardMomentsTest, ReadoutThresholdZeroesLowCellsAndSamplingFractionStays) {
  const float threshold = static_cast<float>(toymc::kReadoutThresholdGev);
  auto count = [&](const std::vector<float>& cells, int64_t* hits, int64_t* low) {
    for (float v : cells) {
      *hits += v > 0;
      *low += v > 0 && v < threshold;
    }
  };
  int64_t standard_hits = 0, standard_low = 0, hard_hits = 0, hard_low = 0;
  count(*standard_cells_, &standard_hits, &standard_low);
  count(*hard_cells_, &hard_hits, &hard_low);
  EXPECT_EQ(hard_low, 0);
  EXPECT_GT(standard_low, standard_hits / 10) << "the threshold must matter for the test to";
  EXPECT_LT(hard_hits, standard_hits - standard_low / 2);

  auto sf = [](const Shower& s, std::vector<double>* v) { v->push_back(s.sf); };
  const std::vector<double> hs = Each(*hard_, sf), ss = Each(*standard_, sf);
  double h_mean = 0, s_mean = 0;
  for (size_t i = 0; i < hs.size(); ++i) {
    h_mean += hs[i] / hs.size();
    s_mean += ss[i] / ss.size();
  }
  // The hard effects keep the mean energy (the Landau factor has mean 1, <start + T> stays T); the
  // threshold removes a little, the narrower profile keeps a little more in the thin layers.
  EXPECT_NEAR(h_mean / s_mean, 1.0, 0.05);
  EXPECT_GT(SpreadOf(hs).var, SpreadOf(ss).var);
}

TEST(ToyMcHardTest, TwoGeVShowersAreSimulated) {
  ToyMcConfig c;
  c.events = 200;
  c.energy_min_gev = c.energy_max_gev = 2.0;
  c.hard = true;
  const ShowerSet s = Simulate(c);
  double sf = 0;
  for (int64_t i = 0; i < s.events(); ++i) {
    const float* ev = s.event(i);
    double total = 0;
    for (int64_t k = 0; k < s.cells_per_event(); ++k) total += ev[k];
    EXPECT_GT(total, 0) << "event " << i;
    sf += total / 2.0 / static_cast<double>(s.events());
  }
  // About 180 spots of 11 MeV: the raw sampling fraction stays ~2%, a little more of it lost under
  // the threshold than at high energy.
  EXPECT_GT(sf, 0.015);
  EXPECT_LT(sf, 0.025);
}

}  // namespace
}  // namespace gantry::showers
