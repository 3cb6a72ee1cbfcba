// Tests of showers/toy_mc: spec parsing, determinism, and the physics of reference section F.
// Expected values come from the GFlash formulas and the detector constants, not from running the
// code.
#include "showers/toy_mc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

namespace gantry::showers {
namespace {

constexpr double kPi = 3.14159265358979323846;

ShowerSet Simulate(ToyMcConfig c) {
  absl::StatusOr<ShowerSet> s = SimulateToyMc(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : ShowerSet{};
}

ToyMcConfig AtEnergy(double e, int64_t events, uint64_t seed) {
  ToyMcConfig c;
  c.events = events;
  c.energy_min_gev = c.energy_max_gev = e;
  c.seed = seed;
  c.threads = 2;
  return c;
}

// Per-layer sums of one event (z is the last, fastest axis).
std::vector<double> LayerSums(const ShowerSet& s, int64_t i) {
  std::vector<double> layers(s.shape[2], 0.0);
  const float* ev = s.event(i);
  for (int64_t c = 0; c < s.cells_per_event(); ++c) layers[c % s.shape[2]] += ev[c];
  return layers;
}

double Total(const ShowerSet& s, int64_t i) {
  const float* ev = s.event(i);
  return std::accumulate(ev, ev + s.cells_per_event(), 0.0);
}

// Expected depth of the shower maximum (X0) from GFlash with the sampling corrections of section F.
double ExpectedTmaxX0(double e_gev) {
  using namespace toymc;  // NOLINT
  const double y = e_gev / kCriticalGev;
  const double x0_eff = (kThinMm + kSiliconMm) / (kThinMm / kX0Mm + kSiliconMm / 93.7);
  const double fs = x0_eff / (kThinMm + kSiliconMm);
  const double ehat = 1.0 / (1.0 + 0.007 * (kZ - 14.0));
  return (std::log(y) - 0.812) - 0.55 / fs - 0.69 * (1.0 - ehat);
}

TEST(ToyMcSpecTest, ParsesTheDocumentedExample) {
  absl::StatusOr<ToyMcConfig> c =
      ParseToyMcSpec("toymc:layout=51,events=1000,seed=7,emin=10,emax=500,theta=60:120");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layout, Layout::kVariableAngle3DGan);
  EXPECT_EQ(c->events, 1000);
  EXPECT_EQ(c->seed, 7u);
  EXPECT_EQ(c->energy_min_gev, 10);
  EXPECT_EQ(c->energy_max_gev, 500);
  EXPECT_NEAR(c->theta_min_rad, kPi / 3, 1e-12);
  EXPECT_NEAR(c->theta_max_rad, 2 * kPi / 3, 1e-12);
  EXPECT_EQ(c->particle, "Ele");
}

TEST(ToyMcSpecTest, FormatRoundTrips) {
  ToyMcConfig c;
  c.layout = Layout::kVariableAngle3DGan;
  c.events = 123;
  c.seed = 99;
  c.energy_min_gev = 2.5;
  c.energy_max_gev = 333.3;
  c.theta_min_rad = 1.1;
  c.theta_max_rad = 1.9;
  c.particle = "Gamma";
  c.energy_scale = 1.1;
  c.depth_scale = 1.2;
  c.threads = 2;
  const std::string spec = FormatToyMcSpec(c);
  absl::StatusOr<ToyMcConfig> back = ParseToyMcSpec(spec);
  ASSERT_TRUE(back.ok()) << back.status() << " for " << spec;
  EXPECT_EQ(back->layout, c.layout);
  EXPECT_EQ(back->events, c.events);
  EXPECT_EQ(back->seed, c.seed);
  EXPECT_EQ(back->energy_min_gev, c.energy_min_gev);
  EXPECT_EQ(back->energy_max_gev, c.energy_max_gev);
  EXPECT_EQ(back->theta_min_rad, c.theta_min_rad);
  EXPECT_EQ(back->theta_max_rad, c.theta_max_rad);
  EXPECT_EQ(back->particle, c.particle);
  EXPECT_EQ(back->energy_scale, c.energy_scale);
  EXPECT_EQ(back->depth_scale, c.depth_scale);
  EXPECT_EQ(FormatToyMcSpec(*back), spec);
  EXPECT_EQ(spec.find("threads"), std::string::npos) << "threads never changes the sample";
  EXPECT_EQ(FormatToyMcSpec(ToyMcConfig{}),
            "toymc:layout=25,events=1000,seed=1,emin=10,emax=500,particle=Ele");
}

TEST(ToyMcSpecTest, ErrorsNameTheKey) {
  struct Case {
    const char* spec;
    const char* fragment;
  };
  for (const Case& c : std::vector<Case>{{"toymc:layout=30", "'layout'"},
                                         {"toymc:events=abc", "'events'"},
                                         {"toymc:emin=x", "'emin'"},
                                         {"toymc:theta=a:b", "'theta'"},
                                         {"toymc:colour=red", "unknown key 'colour'"},
                                         {"toymc:events", "not key=value"},
                                         {"toymc:emin=600,emax=500", "emin"},
                                         {"toymc:layout=51,theta=0:120", "theta"},
                                         {"toymc:particle=Muon", "particle"},
                                         {"toymc:threads=0", "threads"},
                                         {"toymc:escale=-1", "escale"}}) {
    absl::StatusOr<ToyMcConfig> r = ParseToyMcSpec(c.spec);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.spec;
    EXPECT_NE(r.status().message().find(c.fragment), std::string::npos)
        << c.spec << " -> " << r.status();
  }
}

TEST(ToyMcTest, DeterministicBySeedNotByThreads) {
  for (Layout layout : {Layout::kFixedAngle3DGan, Layout::kVariableAngle3DGan}) {
    ToyMcConfig c;
    c.layout = layout;
    c.events = 9;
    c.seed = 42;
    c.threads = 1;
    const ShowerSet one = Simulate(c);
    c.threads = 3;
    const ShowerSet three = Simulate(c);
    EXPECT_EQ(one.cells, three.cells);
    EXPECT_EQ(one.energy_gev, three.energy_gev);
    EXPECT_EQ(one.theta_rad, three.theta_rad);
    EXPECT_EQ(one.theta_rad.empty(), layout == Layout::kFixedAngle3DGan);
    c.seed = 43;
    const ShowerSet other = Simulate(c);
    EXPECT_NE(one.cells, other.cells);
    EXPECT_NE(one.energy_gev, other.energy_gev);
    // A slice of the sample equals the same events of the whole.
    absl::StatusOr<ShowerSet> slice = SimulateToyMcRange(c, 3, 4);
    ASSERT_TRUE(slice.ok());
    EXPECT_TRUE(std::equal(slice->cells.begin(), slice->cells.end(), other.event(3)));
    EXPECT_EQ(slice->energy_gev[0], other.energy_gev[3]);
  }
}

TEST(ToyMcTest, RefusesSamplesTooLargeForMemory) {
  ToyMcConfig c;
  c.layout = Layout::kVariableAngle3DGan;
  c.events = 1'000'000;  // 65,025 cells each: 260 GB
  absl::StatusOr<ShowerSet> s = SimulateToyMc(c);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted) << s.status();
  EXPECT_NE(s.status().message().find("SimulateToyMcRange"), std::string::npos);
}

TEST(ToyMcTest, EnergiesAndAnglesInRange) {
  ToyMcConfig c;
  c.layout = Layout::kVariableAngle3DGan;
  c.events = 200;
  c.energy_min_gev = 10;
  c.energy_max_gev = 500;
  const ShowerSet s = Simulate(c);
  ASSERT_EQ(s.events(), 200);
  EXPECT_EQ(s.shape, (std::array<int64_t, 3>{51, 51, 25}));
  double e_mean = 0, t_mean = 0;
  for (int64_t i = 0; i < s.events(); ++i) {
    EXPECT_GE(s.energy_gev[i], 10.0f);
    EXPECT_LE(s.energy_gev[i], 500.0f);
    EXPECT_GE(s.theta_rad[i], static_cast<float>(kPi / 3) - 1e-6f);
    EXPECT_LE(s.theta_rad[i], static_cast<float>(2 * kPi / 3) + 1e-6f);
    e_mean += s.energy_gev[i] / 200.0;
    t_mean += s.theta_rad[i] / 200.0;
  }
  // Uniform draws: mean 255 GeV (sd of the mean 141/sqrt(200) = 10) and 90 degrees (sd 1.2
  // degrees).
  EXPECT_NEAR(e_mean, 255.0, 40.0);
  EXPECT_NEAR(t_mean, kPi / 2, 0.07);
  for (float v : s.cells) ASSERT_GE(v, 0.0f);
}

TEST(ToyMcPhysicsTest, LongitudinalProfilePeaksAtGFlashTmax) {
  for (double e : {20.0, 100.0, 400.0}) {
    const ShowerSet s = Simulate(AtEnergy(e, 200, 11));
    std::vector<double> profile(25, 0.0);
    for (int64_t i = 0; i < s.events(); ++i) {
      std::vector<double> l = LayerSums(s, i);
      for (int z = 0; z < 25; ++z) profile[z] += l[z];
    }
    // Visible energy per layer is proportional to the energy density (thin: 0.685 X0 at full
    // sampling, thick: 1.37 X0 at half), so the layer profile peaks at the mode of the Gamma
    // profile, T_max.
    const int peak =
        static_cast<int>(std::max_element(profile.begin(), profile.end()) - profile.begin());
    EXPECT_NEAR(LayerCentreX0(peak), ExpectedTmaxX0(e), 1.0) << "E=" << e << " peak layer " << peak;
  }
}

TEST(ToyMcPhysicsTest, ShowerDepthGrowsWithLnE) {
  std::vector<double> ln_e, depth;
  for (double e : {10.0, 30.0, 90.0, 270.0}) {
    const ShowerSet s = Simulate(AtEnergy(e, 150, 12));
    double mean = 0;
    for (int64_t i = 0; i < s.events(); ++i) {
      std::vector<double> l = LayerSums(s, i);
      double w = 0, wt = 0;
      for (int z = 0; z < 25; ++z) {
        w += l[z];
        wt += l[z] * LayerCentreX0(z);
      }
      mean += wt / w / s.events();
    }
    ln_e.push_back(std::log(e));
    depth.push_back(mean);
  }
  // Least-squares slope of the mean centroid depth against ln E. GFlash: T = ln(E/Ec) - const, so
  // 1 X0 per e-fold; the centroid T + 1/b follows it; longitudinal leakage at 23 X0 pulls it down a
  // bit.
  const double mx = std::accumulate(ln_e.begin(), ln_e.end(), 0.0) / 4;
  const double my = std::accumulate(depth.begin(), depth.end(), 0.0) / 4;
  double sxy = 0, sxx = 0;
  for (int i = 0; i < 4; ++i) {
    sxy += (ln_e[i] - mx) * (depth[i] - my);
    sxx += (ln_e[i] - mx) * (ln_e[i] - mx);
  }
  const double slope = sxy / sxx;
  EXPECT_GT(slope, 0.7);
  EXPECT_LT(slope, 1.2);
  for (int i = 1; i < 4; ++i) EXPECT_GT(depth[i], depth[i - 1]);
}

TEST(ToyMcPhysicsTest, EnergyResolutionScalesAsOneOverSqrtE) {
  // Calibrated energy: thick layers sample half as often, so they get weight 2.
  std::vector<double> inv_e, var;
  for (double e : {10.0, 40.0, 160.0}) {
    const ShowerSet s = Simulate(AtEnergy(e, 250, 13));
    double sum = 0, sum2 = 0;
    for (int64_t i = 0; i < s.events(); ++i) {
      std::vector<double> l = LayerSums(s, i);
      double reco = 0;
      for (int z = 0; z < 25; ++z) reco += (z < toymc::kThinLayers ? 1.0 : 2.0) * l[z];
      sum += reco;
      sum2 += reco * reco;
    }
    const double n = static_cast<double>(s.events()), mean = sum / n;
    inv_e.push_back(1.0 / e);
    var.push_back((sum2 / n - mean * mean) / (mean * mean));
  }
  // Fit (sigma/E)^2 = a^2 / E + c^2 through the three points (least squares, linear in 1/E).
  const double mx = (inv_e[0] + inv_e[1] + inv_e[2]) / 3, my = (var[0] + var[1] + var[2]) / 3;
  double sxy = 0, sxx = 0;
  for (int i = 0; i < 3; ++i) {
    sxy += (inv_e[i] - mx) * (var[i] - my);
    sxx += (inv_e[i] - mx) * (inv_e[i] - mx);
  }
  const double a2 = sxy / sxx, c2 = my - a2 * mx;
  // The stochastic term is the spot smearing c_s = 0.11 / sqrt(GeV); the constant term only comes
  // from leakage of a 23 X0, 6.6 R_M half-width calorimeter, a few per cent at most.
  ASSERT_GT(a2, 0.0);
  EXPECT_NEAR(std::sqrt(a2), 0.11, 0.03);
  EXPECT_LT(c2, 0.03 * 0.03);
  // Sixteen times the energy: the resolution improves by well over a factor 2 (4 if purely
  // stochastic).
  EXPECT_GT(std::sqrt(var[0] / var[2]), 2.0);
}

TEST(ToyMcPhysicsTest, TransverseWidthIsAboutOneMoliereRadius) {
  const ShowerSet s = Simulate(AtEnergy(100.0, 150, 14));
  // The axis goes through the centre of cell (12, 12). A 3x3 block (15.3 mm square) has the area of
  // a disc of radius 0.93 R_M (R_M = 9.327 mm = 1.83 cells), which by definition holds ~90% of the
  // energy. A single cell (0.55 R_M wide) holds much less, a 9x9 block (4.9 R_M wide) nearly all.
  double all = 0, in3 = 0, in1 = 0, in9 = 0;
  for (int64_t i = 0; i < s.events(); ++i) {
    const float* ev = s.event(i);
    for (int x = 0; x < 25; ++x) {
      for (int y = 0; y < 25; ++y) {
        double col = 0;
        for (int z = 0; z < 25; ++z) col += ev[(x * 25 + y) * 25 + z];
        all += col;
        const int d = std::max(std::abs(x - 12), std::abs(y - 12));
        if (d == 0) in1 += col;
        if (d <= 1) in3 += col;
        if (d <= 4) in9 += col;
      }
    }
  }
  EXPECT_GT(in3 / all, 0.85);
  EXPECT_LT(in3 / all, 0.95);
  EXPECT_LT(in1 / all, 0.8);
  EXPECT_GT(in9 / all, 0.96);
}

TEST(ToyMcPhysicsTest, VisibleFractionAboutTwoPercentLikeThe3DGanFit) {
  for (double e : {10.0, 100.0, 400.0}) {
    const ShowerSet s = Simulate(AtEnergy(e, 100, 15));
    double sf = 0;
    for (int64_t i = 0; i < s.events(); ++i) sf += Total(s, i) / e / s.events();
    // Reference section A: the 3DGAN sampling-fraction fit of the Geant4 data,
    // ratio = polyval([0.0018, -0.023, 0.11, -0.28, 2.21], E/100) per cent.
    const double x = e / 100.0;
    const double fit = (((0.0018 * x - 0.023) * x + 0.11) * x - 0.28) * x + 2.21;
    EXPECT_NEAR(sf, fit / 100.0, 0.1 * fit / 100.0) << "E=" << e;
    EXPECT_GT(sf, 0.015);
    EXPECT_LT(sf, 0.025);
  }
}

TEST(ToyMcPhysicsTest, AngleShiftsCentroidByCotThetaPerDepth) {
  for (double deg : {60.0, 90.0, 120.0}) {
    ToyMcConfig c = AtEnergy(100.0, 40, 16);
    c.layout = Layout::kVariableAngle3DGan;
    c.theta_min_rad = c.theta_max_rad = deg * kPi / 180.0;
    const ShowerSet s = Simulate(c);
    // Weighted fit of the per-layer x barycentre (mm) against the layer depth (mm), all events.
    double sw = 0, sd = 0, sx = 0, sdd = 0, sdx = 0, measured = 0;
    for (int64_t i = 0; i < s.events(); ++i) {
      const float* ev = s.event(i);
      for (int z = 0; z < 25; ++z) {
        double w = 0, wx = 0;
        for (int x = 0; x < 51; ++x) {
          for (int y = 0; y < 51; ++y) {
            const double v = ev[(x * 51 + y) * 25 + z];
            w += v;
            wx += v * (x + 0.5) * toymc::kCellMm;
          }
        }
        if (w <= 0) continue;
        const double d = LayerCentreMm(z), xb = wx / w;
        sw += w;
        sd += w * d;
        sx += w * xb;
        sdd += w * d * d;
        sdx += w * d * xb;
      }
      measured += MeasureThetaRad(ev, s.shape) / s.events();
    }
    const double slope = (sw * sdx - sd * sx) / (sw * sdd - sd * sd);
    const double cot = std::cos(deg * kPi / 180.0) / std::sin(deg * kPi / 180.0);
    EXPECT_NEAR(slope, cot, 0.05) << deg << " degrees";
    EXPECT_NEAR(measured * 180.0 / kPi, deg, 2.0);
  }
}

TEST(ToyMcPhysicsTest, DistortionsDoWhatTheySay) {
  ToyMcConfig c = AtEnergy(100.0, 60, 17);
  const ShowerSet base = Simulate(c);
  c.energy_scale = 1.1;
  const ShowerSet scaled = Simulate(c);
  for (size_t i = 0; i < base.cells.size(); ++i) {
    ASSERT_NEAR(scaled.cells[i], 1.1f * base.cells[i], 1e-6f * base.cells[i]);
  }
  c.energy_scale = 1.0;
  c.depth_scale = 1.2;
  const ShowerSet deep = Simulate(c);
  auto mean_depth = [](const ShowerSet& s) {
    double mean = 0;
    for (int64_t i = 0; i < s.events(); ++i) {
      std::vector<double> l = LayerSums(s, i);
      double w = 0, wt = 0;
      for (int z = 0; z < 25; ++z) {
        w += l[z];
        wt += l[z] * LayerCentreX0(z);
      }
      mean += wt / w / s.events();
    }
    return mean;
  };
  // Stretching by 1.2 moves the centroid (~10 X0 at 100 GeV) deeper by up to 20%, less the part
  // that leaks out of the back.
  const double ratio = mean_depth(deep) / mean_depth(base);
  EXPECT_GT(ratio, 1.1);
  EXPECT_LT(ratio, 1.21);
}

}  // namespace
}  // namespace gantry::showers
