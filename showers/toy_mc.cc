// GFlash toy Monte Carlo. Per shower: draw E (and theta), the correlated (ln T, ln a) of the
// longitudinal Gamma profile with the sampling-calorimeter corrections, split ~10.3/c_s E^0.959
// energy spots over the layers (multinomial on the Gamma CDF), scatter each spot radially
// (core/tail), and smear each cell's total with Gamma(n k, c_s^2), which equals the sum of the
// per-spot Gamma(k, c_s^2) smearings it replaces. The hard variant (reference section H) adds its
// per-shower draws after the longitudinal ones, sub-showers after the layer spots, and a Landau
// factor and the readout threshold per cell; with it off nothing of it is drawn or computed
// differently, so the standard sample is unchanged bit for bit.
#include "showers/toy_mc.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/random_bits.h"
#include "base/safe_text.h"
#include "base/status_macros.h"

namespace gantry::showers {
namespace {

using namespace toymc;  // NOLINT: detector constants

constexpr double kPi = 3.14159265358979323846;
constexpr double kMoyalMean = 0.57721566490153286 + 0.69314718055994531;  // Euler gamma + ln 2
constexpr double kSpotSigma = 0.11;  // c_s: sampling fluctuation per sqrt(GeV)
// Visible fraction of the energy deposited in a thin (2.4 mm W) layer; a thick layer samples half
// as often, so its visible fraction is half. Gives ~2% overall at 100 GeV (reference section F).
constexpr double kVisibleThin = 0.025;
// At most 4 GiB of cells in one ShowerSet; larger samples are simulated in slices.
constexpr int64_t kMaxCellsInMemory = int64_t{1} << 30;

// xoshiro256++ seeded through splitmix64 (base/random_bits.h) with the toy's distributions; a
// UniformRandomBitGenerator.
class Rng {
 public:
  using result_type = uint64_t;
  Rng(uint64_t seed, uint64_t stream)
      : bits_(random_bits::Xoshiro256pp::FromSplitMix(seed ^
                                                      (0x9e3779b97f4a7c15ULL * (stream + 1)))) {}
  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return std::numeric_limits<uint64_t>::max(); }
  uint64_t operator()() { return bits_(); }
  // Uniform in [0, 1).
  double Uniform() { return random_bits::UnitInterval(bits_()); }
  // Uniform in (0, 1).
  double UniformOpen() { return (static_cast<double>((*this)() >> 11) + 0.5) * 0x1.0p-53; }
  double Normal() {  // Marsaglia polar method, one value per call (no cached state).
    double u, v, s;
    do {
      u = 2.0 * Uniform() - 1.0;
      v = 2.0 * Uniform() - 1.0;
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    return u * std::sqrt(-2.0 * std::log(s) / s);
  }
  // Gamma(k, 1) by Marsaglia and Tsang; k < 1 through the u^(1/k) boost.
  double Gamma(double k) { return random_bits::MarsagliaTsangGamma(*this, k); }

 private:
  random_bits::Xoshiro256pp bits_;
};

// Regularised lower incomplete gamma P(a, x) (series below a + 1, continued fraction above).
double GammaP(double a, double x) {
  if (x <= 0) return 0.0;
  const double gln = std::lgamma(a);
  if (x < a + 1.0) {
    double ap = a, sum = 1.0 / a, del = sum;
    for (int n = 0; n < 500; ++n) {
      ap += 1.0;
      del *= x / ap;
      sum += del;
      if (std::fabs(del) < std::fabs(sum) * 1e-12) break;
    }
    return sum * std::exp(-x + a * std::log(x) - gln);
  }
  double b = x + 1.0 - a, c = 1.0 / 1e-300, d = 1.0 / b, h = d;
  for (int i = 1; i < 500; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    d = 1.0 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1.0) < 1e-12) break;
  }
  return 1.0 - std::exp(-x + a * std::log(x) - gln) * h;
}

// Per-layer geometry, computed once.
struct Geometry {
  double x0_lo[kLayers], x0_hi[kLayers];  // absorber depth boundaries in X0
  double centre_mm[kLayers];              // physical depth of the layer centre
  double visible[kLayers];                // visible fraction of the energy deposited in the layer
  double total_mm = 0;
  double sampling_fs = 0;  // GFlash F_s of the thin section (where showers peak)
  double ehat = 0;
  Geometry() {
    double x0 = 0, mm = 0;
    for (int l = 0; l < kLayers; ++l) {
      const double w = l < kThinLayers ? kThinMm : kThickMm;
      x0_lo[l] = x0;
      x0 += w / kX0Mm;
      x0_hi[l] = x0;
      centre_mm[l] = mm + 0.5 * kLayerPitchMm;
      mm += kLayerPitchMm;
      visible[l] = kVisibleThin * kThinMm / w;
    }
    total_mm = mm;
    constexpr double kX0SiliconMm = 93.7;
    const double x0_eff = (kThinMm + kSiliconMm) / (kThinMm / kX0Mm + kSiliconMm / kX0SiliconMm);
    sampling_fs = x0_eff / (kThinMm + kSiliconMm);
    ehat = 1.0 / (1.0 + 0.007 * (kZ - 14.0));  // Z_active = 14 (silicon); ~0.70
  }
};

const Geometry& Geo() {
  static const Geometry* geometry = new Geometry();
  return *geometry;
}

// cos and sin of 4096 azimuths at bin centres.
struct Azimuths {
  double cos[4096], sin[4096];
  Azimuths() {
    for (int i = 0; i < 4096; ++i) {
      const double phi = (i + 0.5) * 2.0 * kPi / 4096.0;
      cos[i] = std::cos(phi);
      sin[i] = std::sin(phi);
    }
  }
};

const Azimuths& AzimuthTable() {
  static const Azimuths* table = new Azimuths();
  return *table;
}

std::array<int64_t, 3> ShapeOf(Layout layout) {
  return layout == Layout::kVariableAngle3DGan ? std::array<int64_t, 3>{51, 51, 25}
                                               : std::array<int64_t, 3>{25, 25, 25};
}

// Scratch buffers reused across the showers one thread simulates.
struct Scratch {
  std::vector<int32_t> counts;
  std::vector<int32_t> touched;
};

// The primary's energy and incidence angle (drawn only for variable angle), in that draw order.
struct Primary {
  double energy = 0;
  double theta = kPi / 2;
};

Primary DrawPrimary(const ToyMcConfig& c, Rng& rng) {
  Primary p;
  p.energy = c.energy_min_gev + (c.energy_max_gev - c.energy_min_gev) * rng.Uniform();
  if (c.layout == Layout::kVariableAngle3DGan) {
    p.theta = c.theta_min_rad + (c.theta_max_rad - c.theta_min_rad) * rng.Uniform();
  }
  return p;
}

// The longitudinal Gamma profile: depth of the maximum, shape alpha and rate beta.
struct Longitudinal {
  double t_max = 0, alpha = 0, beta = 0;
  double t_start = 0;  // where the profile starts along the axis (unstretched X0); 0 unless hard
};

// Longitudinal parameters (GFlash, homogeneous then sampling corrections) with correlated
// fluctuations.
Longitudinal DrawLongitudinal(double energy, Rng& rng) {
  const Geometry& g = Geo();
  const double lny = std::log(energy / kCriticalGev);
  const double t_hom = std::max(lny - 0.812, 0.1);
  const double a_hom = std::max(0.81 + (0.458 + 2.26 / kZ) * lny, 0.1);
  const double mean_ln_t =
      std::log(std::max(t_hom - 0.55 / g.sampling_fs - 0.69 * (1.0 - g.ehat), 0.5));
  const double mean_ln_a = std::log(std::max(a_hom - 0.476 / g.sampling_fs, 1.2));
  const double sigma_ln_t = std::min(0.5, 1.0 / std::max(-1.4 + 1.26 * lny, 2.0));
  const double sigma_ln_a = std::min(0.5, 1.0 / std::max(-0.58 + 0.86 * lny, 2.0));
  const double rho = std::clamp(0.705 - 0.023 * lny, -1.0, 1.0);
  const double z1 = rng.Normal(), z2 = rng.Normal();
  Longitudinal out;
  out.t_max = std::exp(mean_ln_t + sigma_ln_t * z1);
  out.alpha =
      std::max(1.05, std::exp(mean_ln_a + sigma_ln_a * (rho * z1 + std::sqrt(1 - rho * rho) * z2)));
  out.beta = (out.alpha - 1.0) / out.t_max;
  return out;
}

// What places spots in the grid: the incidence geometry and the GFlash radial parameters that do
// not depend on the layer.
struct Lateral {
  int64_t nx = 0, ny = 0, nz = 0;
  double sin_t = 0, cot_t = 0;
  double axis_per_normal = 0;  // unstretched axis X0 per normal X0
  double t_max = 0;
  double cell_inv = 0, x_centre = 0, y_centre = 0, depth_centre = 0;
  double ln_e = 0, rt_scale = 0, k4 = 0, p_scale = 0, p2 = 0, p3 = 0;
  // The hard variant's per-shower draws (no-ops otherwise): the axis shift in cells, the factor on
  // the radii, and the start depth along the axis (unstretched X0).
  double x_shift = 0, y_shift = 0, lateral_scale = 1, t_start = 0;
};

Lateral MakeLateral(const ToyMcConfig& c, const Primary& p, double t_max,
                    const std::array<int64_t, 3>& shape) {
  const Geometry& g = Geo();
  Lateral s;
  s.sin_t = std::sin(p.theta);
  s.cot_t = std::cos(p.theta) / std::sin(p.theta);
  s.axis_per_normal = 1.0 / (s.sin_t * c.depth_scale);
  s.t_max = t_max;
  s.nx = shape[0];
  s.ny = shape[1];
  s.nz = shape[2];
  s.cell_inv = 1.0 / kCellMm;
  s.x_centre = 0.5 * static_cast<double>(s.nx) * kCellMm;
  s.y_centre = 0.5 * static_cast<double>(s.ny) * kCellMm;
  s.depth_centre = 0.5 * g.total_mm;  // the axis crosses the grid centre at mid depth
  s.ln_e = std::log(p.energy);
  s.rt_scale = 0.659 - 0.00309 * kZ;
  s.k4 = 0.3585 + 0.0412 * s.ln_e;
  s.p_scale = 2.632 - 0.00094 * kZ;
  s.p2 = 0.401 + 0.00187 * kZ;
  s.p3 = 1.313 - 0.0686 * s.ln_e;
  return s;
}

// Probability of a spot in each layer: the Gamma CDF across the layer's (stretched) depth.
void LayerProbabilities(const Longitudinal& lp, double axis_per_normal, double layer_p[kLayers]) {
  const Geometry& g = Geo();
  double cdf_lo = 0.0;
  for (int l = 0; l < kLayers; ++l) {
    const double cdf_hi = GammaP(
        lp.alpha, std::max(0.0, lp.beta * g.x0_hi[l] * axis_per_normal - lp.beta * lp.t_start));
    layer_p[l] = std::max(0.0, cdf_hi - cdf_lo);
    cdf_lo = cdf_hi;
  }
}

// Where the shower axis crosses layer `l`, in cell units.
void AxisInLayer(const Lateral& s, int l, double* x, double* y) {
  const double x_axis = s.x_centre + (Geo().centre_mm[l] - s.depth_centre) * s.cot_t;
  *x = x_axis * s.cell_inv + s.x_shift;
  *y = s.y_centre * s.cell_inv + s.y_shift;
}

// Counts one spot at (x, y) (cell units) of layer `l`; a spot outside the grid leaks out.
inline void CountSpot(const Lateral& s, double x, double y, int l, Scratch* scratch) {
  if (!(x >= 0.0 && x < static_cast<double>(s.nx) && y >= 0.0 && y < static_cast<double>(s.ny))) {
    return;
  }
  const int64_t idx = (static_cast<int64_t>(x) * s.ny + static_cast<int64_t>(y)) * s.nz + l;
  if (scratch->counts[idx]++ == 0) scratch->touched.push_back(static_cast<int32_t>(idx));
}

// Scatters `n` spots of layer `l` radially (core/tail) and counts them per cell.
void ScatterLayerSpots(const Lateral& s, int l, int64_t n, Rng& rng, Scratch* scratch) {
  const Geometry& g = Geo();
  // Radial shape at this layer: tau = (axis depth from the start, unstretched) / T.
  const double x0_mid = 0.5 * (g.x0_lo[l] + g.x0_hi[l]);
  const double tau = std::max(0.0, x0_mid * s.axis_per_normal - s.t_start) / s.t_max;
  const double r_core = std::max(0.01, 0.0251 + 0.00319 * s.ln_e + (0.1162 - 0.000381 * kZ) * tau);
  const double r_tail = std::max(
      0.01, s.rt_scale * (std::exp(-2.59 * (tau - 0.645)) + std::exp(s.k4 * (tau - 0.645))));
  const double pe = (s.p2 - tau) / s.p3;
  const double p_core = std::clamp(s.p_scale * std::exp(pe - std::exp(pe)), 0.0, 1.0);
  const double core_mm = r_core * kMoliereMm * s.lateral_scale;
  const double tail_mm = r_tail * kMoliereMm * s.lateral_scale;
  // One 64-bit draw per spot: 24 bits choose core or tail, 12 bits the azimuth (a 4096-entry
  // table, at most 0.05 mm off at 6 R_M), 28 bits the radius quantile u.
  double x0 = 0, y0 = 0;
  AxisInLayer(s, l, &x0, &y0);
  const double core_x = core_mm * s.cell_inv * s.sin_t, core_y = core_mm * s.cell_inv;
  const double tail_x = tail_mm * s.cell_inv * s.sin_t, tail_y = tail_mm * s.cell_inv;
  const uint64_t core_cut = static_cast<uint64_t>(p_core * 16777216.0);
  const Azimuths& az = AzimuthTable();
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t w = rng();
    const bool core = (w >> 40) < core_cut;
    const int phi = static_cast<int>((w >> 28) & 4095);
    const double u = (static_cast<double>(w & 0xFFFFFFF) + 0.5) * 0x1.0p-28;
    const double q = std::sqrt(u / (1.0 - u));
    const double x = x0 + q * (core ? core_x : tail_x) * az.cos[phi];
    const double y = y0 + q * (core ? core_y : tail_y) * az.sin[phi];
    CountSpot(s, x, y, l, scratch);
  }
}

// Splits `spots` over the layers (multinomial as a chain of binomials) and scatters each layer's
// share, layer by layer.
void DistributeSpots(const Lateral& s, const double layer_p[kLayers], int64_t spots, Rng& rng,
                     Scratch* scratch) {
  scratch->counts.assign(static_cast<size_t>(s.nx * s.ny * s.nz), 0);
  scratch->touched.clear();
  int64_t remaining = spots;
  double remaining_p = 1.0;
  for (int l = 0; l < kLayers && remaining > 0 && remaining_p > 0; ++l) {
    const double q = std::clamp(layer_p[l] / remaining_p, 0.0, 1.0);
    int64_t n = 0;
    if (q >= 1.0) {
      n = remaining;
    } else if (q > 0.0) {
      n = std::binomial_distribution<int64_t>(remaining, q)(rng);
    }
    remaining -= n;
    remaining_p -= layer_p[l];
    if (n == 0) continue;
    ScatterLayerSpots(s, l, n, rng, scratch);
  }
}

// The hard variant's per-shower draws, in this order: the axis shift in x and in y, the lateral
// scale, the start depth. The Gamma profile then starts at the start depth with its T shortened by
// the mean start (so that <start + T> stays GFlash's T; at most halved) and its shape alpha kept.
void DrawHardShower(Rng& rng, Longitudinal* lp, Lateral* s) {
  s->x_shift = kImpactJitterCells * (2.0 * rng.Uniform() - 1.0);
  s->y_shift = kImpactJitterCells * (2.0 * rng.Uniform() - 1.0);
  s->lateral_scale = std::exp(kLateralScaleSigma * rng.Normal());
  lp->t_start = -kStartDepthMeanX0 * std::log(rng.UniformOpen());
  lp->t_max = std::max(lp->t_max - kStartDepthMeanX0, 0.5 * lp->t_max);
  lp->beta = (lp->alpha - 1.0) / lp->t_max;
  s->t_start = lp->t_start;
  s->t_max = lp->t_max;
}

// The spots each sub-shower of the hard variant takes: kSubShowerSpotFraction of the shower's,
// leaving the layer spots at least as many as all sub-showers together.
int64_t SubShowerSpots(int64_t spots) {
  return std::min<int64_t>(std::llround(kSubShowerSpotFraction * static_cast<double>(spots)),
                           spots / (2 * kSubShowers));
}

// Scatters the hard variant's sub-showers of `spots_each` spots. Per sub-shower: a centre layer
// drawn from the layer profile, a length of kSubShowerMinLayers to kSubShowerMaxLayers layers from
// (length - 1) / 2 layers before it, one Gaussian offset from the axis kept over all of them, and
// its spots spread evenly over those layers, Gaussian around the offset. What lies behind the last
// layer or outside the grid leaks out.
void ScatterSubShowers(const Lateral& s, const double layer_p[kLayers], int64_t spots_each,
                       Rng& rng, Scratch* scratch) {
  double total_p = 0;
  for (int l = 0; l < kLayers; ++l) total_p += layer_p[l];
  const double offset = kSubShowerOffsetMoliere * kMoliereMm * s.lateral_scale * s.cell_inv;
  const double width = kSubShowerWidthMoliere * kMoliereMm * s.lateral_scale * s.cell_inv;
  constexpr int kLengths = kSubShowerMaxLayers - kSubShowerMinLayers + 1;
  for (int k = 0; k < kSubShowers; ++k) {
    double u = rng.Uniform() * total_p;
    int centre = 0;
    while (centre < kLayers - 1 && u >= layer_p[centre]) u -= layer_p[centre++];
    const int length = kSubShowerMinLayers + static_cast<int>(rng.Uniform() * kLengths);
    const int first = std::max(0, centre - (length - 1) / 2);
    const double dx = offset * s.sin_t * rng.Normal(), dy = offset * rng.Normal();
    for (int j = 0; j < length && first + j < kLayers; ++j) {
      const int l = first + j;
      const int64_t n = spots_each / length + (j < spots_each % length ? 1 : 0);
      double x0 = 0, y0 = 0;
      AxisInLayer(s, l, &x0, &y0);
      for (int64_t i = 0; i < n; ++i) {
        const double x = x0 + dx + width * s.sin_t * rng.Normal();
        const double y = y0 + dy + width * rng.Normal();
        CountSpot(s, x, y, l, scratch);
      }
    }
  }
}

// The hard variant's Landau factor on the deposit of `n` spots: 1 + w (X - <X>) / sqrt(n), X a
// standard Moyal variate, drawn as -ln(Z^2) with Z standard normal; never below 0.
double LandauFactor(int32_t n, Rng& rng) {
  const double z = rng.Normal();
  const double x = -std::log(std::max(z * z, 1e-30));
  return std::max(0.0, 1.0 + kLandauWidth * (x - kMoyalMean) / std::sqrt(static_cast<double>(n)));
}

// Sampling fluctuations: the sum of n Gamma(k, c_s^2) deposits is Gamma(n k, c_s^2). The hard
// variant then multiplies by the Landau factor and zeroes cells below the readout threshold.
void SmearCells(const ToyMcConfig& c, double spot_energy, int64_t nz, const Scratch& scratch,
                Rng& rng, float* cells) {
  const Geometry& g = Geo();
  const double theta_s = kSpotSigma * kSpotSigma;
  const double k_spot = spot_energy / theta_s;
  const float threshold = static_cast<float>(kReadoutThresholdGev);
  for (int32_t idx : scratch.touched) {
    const int l = static_cast<int>(idx % nz);
    const int32_t n = scratch.counts[idx];
    const double deposit = theta_s * rng.Gamma(k_spot * n);
    if (!c.hard) {
      cells[idx] = static_cast<float>(deposit * g.visible[l] * c.energy_scale);
      continue;
    }
    const float v =
        static_cast<float>(deposit * LandauFactor(n, rng) * g.visible[l] * c.energy_scale);
    cells[idx] = v >= threshold ? v : 0.0f;
  }
}

// Simulates one shower into `cells` (zeroed by the caller, shape nx*ny*25). The draw order is
// primary, longitudinal profile, (hard: the per-shower draws), spots layer by layer, (hard:
// sub-showers), then the cell smearing.
void SimulateOne(const ToyMcConfig& c, uint64_t event_index, const std::array<int64_t, 3>& shape,
                 float* cells, float* energy_out, float* theta_out, Scratch* scratch) {
  Rng rng(c.seed, event_index);
  const Primary primary = DrawPrimary(c, rng);
  *energy_out = static_cast<float>(primary.energy);
  if (theta_out != nullptr) *theta_out = static_cast<float>(primary.theta);
  Longitudinal lp = DrawLongitudinal(primary.energy, rng);

  // Spots and their split over layers. Along the axis the spot depth is depth_scale * Gamma(alpha,
  // 1/beta) X0 (hard: plus the start depth); the normal depth is that times sin(theta).
  const int64_t spots =
      std::max<int64_t>(1, std::llround(10.3 / kSpotSigma * std::pow(primary.energy, 0.959)));
  const double spot_energy = primary.energy / static_cast<double>(spots);
  Lateral lateral = MakeLateral(c, primary, lp.t_max, shape);
  if (c.hard) DrawHardShower(rng, &lp, &lateral);
  const int64_t sub_shower_spots = c.hard ? SubShowerSpots(spots) : 0;
  double layer_p[kLayers];
  LayerProbabilities(lp, lateral.axis_per_normal, layer_p);
  DistributeSpots(lateral, layer_p, spots - kSubShowers * sub_shower_spots, rng, scratch);
  if (c.hard) ScatterSubShowers(lateral, layer_p, sub_shower_spots, rng, scratch);
  SmearCells(c, spot_energy, lateral.nz, *scratch, rng, cells);
}

bool IsKnownParticle(absl::string_view p) {
  return p == "Ele" || p == "Gamma" || p == "Pi0" || p == "ChPi";
}

// Shortest decimal that parses back to exactly `v` after `to_internal`.
template <typename F>
std::string ShortestRoundTrip(double shown, double internal, F to_internal) {
  for (int precision = 6; precision <= 17; ++precision) {
    std::string s = absl::StrFormat("%.*g", precision, shown);
    double back = 0;
    if (absl::SimpleAtod(s, &back) && to_internal(back) == internal) return s;
  }
  return absl::StrFormat("%.17g", shown);
}

std::string Num(double v) {
  return ShortestRoundTrip(v, v, [](double x) { return x; });
}
std::string Deg(double rad) {
  return ShortestRoundTrip(rad * 180.0 / kPi, rad, [](double d) { return d * kPi / 180.0; });
}

}  // namespace

double LayerCentreX0(int layer) {
  const Geometry& g = Geo();
  layer = std::clamp(layer, 0, kLayers - 1);
  return 0.5 * (g.x0_lo[layer] + g.x0_hi[layer]);
}

double LayerCentreMm(int layer) { return Geo().centre_mm[std::clamp(layer, 0, kLayers - 1)]; }

double MeasureThetaRad(const float* cells, const std::array<int64_t, 3>& shape) {
  const int64_t nx = shape[0], ny = shape[1], nz = shape[2];
  // Per-layer sums and barycentres in cell units (index + 0.5).
  std::vector<double> sum_z(nz, 0.0), x_z(nz, 0.0), y_z(nz, 0.0);
  double total = 0, x_ref = 0, y_ref = 0, z_ref = 0;
  for (int64_t x = 0; x < nx; ++x) {
    for (int64_t y = 0; y < ny; ++y) {
      const float* column = cells + (x * ny + y) * nz;
      for (int64_t z = 0; z < nz; ++z) {
        const double v = column[z];
        sum_z[z] += v;
        x_z[z] += v * (static_cast<double>(x) + 0.5);
        y_z[z] += v * (static_cast<double>(y) + 0.5);
      }
    }
  }
  for (int64_t z = 0; z < nz; ++z) {
    total += sum_z[z];
    x_ref += x_z[z];
    y_ref += y_z[z];
    z_ref += sum_z[z] * (static_cast<double>(z) + 0.5);
  }
  if (!(total > 0)) return std::numeric_limits<double>::quiet_NaN();
  x_ref /= total;
  y_ref /= total;
  z_ref /= total;
  constexpr double kEps = 1e-7;  // as the reference (Keras epsilon)
  double weighted = 0, weights = 0;
  for (int64_t z = 0; z < nz; ++z) {
    if (!(sum_z[z] > 0)) continue;
    const double dz = static_cast<double>(z) + 0.5 - z_ref;
    const double dy = y_z[z] / sum_z[z] - y_ref;
    const double proj = std::sqrt(std::max(dy * dy + dz * dz, kEps));
    if (proj < std::sqrt(kEps)) continue;
    double m = (x_z[z] / sum_z[z] - x_ref) / proj;
    if (dz < 0) m = -m;
    const double w = static_cast<double>(z) + 0.5;
    weighted += w * (kPi / 2 - std::atan(m));
    weights += w;
  }
  return weights > 0 ? weighted / weights : std::numeric_limits<double>::quiet_NaN();
}

absl::Status ValidateToyMcConfig(const ToyMcConfig& c) {
  if (c.layout != Layout::kFixedAngle3DGan && c.layout != Layout::kVariableAngle3DGan) {
    return absl::InvalidArgumentError(
        "toy MC: layout must be the 3DGAN fixed (25) or variable (51) grid");
  }
  if (c.events < 0 || c.events > 100'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("toy MC: events must be in [0, 1e8], got ", c.events));
  }
  if (!(c.energy_min_gev >= 0.1) || !(c.energy_max_gev >= c.energy_min_gev) ||
      !(c.energy_max_gev <= 10000.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("toy MC: need 0.1 <= emin <= emax <= 10000 GeV, got emin=", c.energy_min_gev,
                     " emax=", c.energy_max_gev));
  }
  if (c.layout == Layout::kVariableAngle3DGan &&
      !(c.theta_min_rad > 0.0 && c.theta_max_rad >= c.theta_min_rad && c.theta_max_rad < kPi)) {
    return absl::InvalidArgumentError(
        absl::StrCat("toy MC: theta range must lie inside (0, 180) degrees with min <= max, got ",
                     c.theta_min_rad * 180 / kPi, ":", c.theta_max_rad * 180 / kPi));
  }
  if (!(c.energy_scale > 0.0 && c.energy_scale < 100.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("toy MC: escale must be in (0, 100), got ", c.energy_scale));
  }
  if (!(c.depth_scale > 0.0 && c.depth_scale < 100.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("toy MC: dscale must be in (0, 100), got ", c.depth_scale));
  }
  if (c.threads < 1 || c.threads > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("toy MC: threads must be in [1, 256], got ", c.threads));
  }
  if (!IsKnownParticle(c.particle)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "toy MC: particle must be Ele, Gamma, Pi0 or ChPi, got '", BoundedField(c.particle), "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShowerSet> SimulateToyMcRange(const ToyMcConfig& config, int64_t first_event,
                                             int64_t count) {
  ToyMcConfig checked = config;
  checked.events = count;
  RETURN_IF_ERROR(ValidateToyMcConfig(checked));
  if (first_event < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("toy MC: first event must be >= 0, got ", first_event));
  }
  ShowerSet set;
  set.layout = config.layout;
  set.shape = ShapeOf(config.layout);
  set.particle = config.particle;
  const int64_t cells = count * set.cells_per_event();
  if (cells > kMaxCellsInMemory) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "toy MC: ", count, " showers need ", cells * 4 / (1 << 20),
        " MiB in memory (limit 4096 MiB); simulate in slices with SimulateToyMcRange"));
  }
  try {
    set.cells.assign(static_cast<size_t>(cells), 0.0f);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "toy MC: cannot allocate ", cells * 4 / (1 << 20), " MiB for ", count, " showers"));
  }
  set.energy_gev.assign(static_cast<size_t>(count), 0.0f);
  const bool has_theta = config.layout == Layout::kVariableAngle3DGan;
  if (has_theta) set.theta_rad.assign(static_cast<size_t>(count), 0.0f);

  auto run = [&](int64_t begin, int64_t end) {
    Scratch scratch;
    for (int64_t i = begin; i < end; ++i) {
      SimulateOne(config, static_cast<uint64_t>(first_event + i), set.shape, set.mutable_event(i),
                  &set.energy_gev[i], has_theta ? &set.theta_rad[i] : nullptr, &scratch);
    }
  };
  const int64_t threads = std::min<int64_t>(config.threads, std::max<int64_t>(count, 1));
  if (threads <= 1) {
    run(0, count);
  } else {
    std::vector<std::thread> pool;
    for (int64_t t = 0; t < threads; ++t) {
      pool.emplace_back(run, count * t / threads, count * (t + 1) / threads);
    }
    for (auto& th : pool) th.join();
  }
  return set;
}

absl::StatusOr<ShowerSet> SimulateToyMc(const ToyMcConfig& config) {
  return SimulateToyMcRange(config, 0, config.events);
}

absl::StatusOr<ToyMcConfig> ParseToyMcSpec(std::string_view spec_in) {
  // Debian's Abseil has its own string_view type.
  const absl::string_view spec(spec_in.data(), spec_in.size());
  ToyMcConfig c;
  absl::string_view body = spec;
  absl::ConsumePrefix(&body, "toymc:");
  auto bad = [&](absl::string_view key, absl::string_view value, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("toy MC spec '", BoundedField(spec), "': key '",
                                                   BoundedField(key), "' has bad value '",
                                                   BoundedField(value), "' (", why, ")"));
  };
  for (absl::string_view item : absl::StrSplit(body, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    const absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    if (item.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("toy MC spec '", BoundedField(spec),
                                                     "': item '", BoundedField(item),
                                                     "' is not key=value"));
    }
    double d = 0;
    if (key == "layout") {
      if (value == "25" || value == "fixed") {
        c.layout = Layout::kFixedAngle3DGan;
      } else if (value == "51" || value == "variable") {
        c.layout = Layout::kVariableAngle3DGan;
      } else {
        return bad(key, value, "use 25 or 51");
      }
    } else if (key == "events") {
      if (!absl::SimpleAtoi(value, &c.events)) return bad(key, value, "not an integer");
    } else if (key == "seed") {
      if (!absl::SimpleAtoi(value, &c.seed)) return bad(key, value, "not an unsigned integer");
    } else if (key == "threads") {
      if (!absl::SimpleAtoi(value, &c.threads)) return bad(key, value, "not an integer");
    } else if (key == "emin" || key == "emax" || key == "escale" || key == "dscale") {
      if (!absl::SimpleAtod(value, &d) || !std::isfinite(d)) return bad(key, value, "not a number");
      (key == "emin"     ? c.energy_min_gev
       : key == "emax"   ? c.energy_max_gev
       : key == "escale" ? c.energy_scale
                         : c.depth_scale) = d;
    } else if (key == "theta") {
      std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(value, ':');
      double lo = 0, hi = 0;
      if (!absl::SimpleAtod(range.first, &lo)) return bad(key, value, "use degrees, e.g. 60:120");
      hi = lo;
      if (value.find(':') != absl::string_view::npos && !absl::SimpleAtod(range.second, &hi)) {
        return bad(key, value, "use degrees, e.g. 60:120");
      }
      c.theta_min_rad = lo * kPi / 180.0;
      c.theta_max_rad = hi * kPi / 180.0;
    } else if (key == "particle") {
      c.particle = std::string(value);
    } else if (key == "hard") {
      if (value != "0" && value != "1") return bad(key, value, "use 0 or 1");
      c.hard = value == "1";
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("toy MC spec '", BoundedField(spec), "': unknown key '", BoundedField(key),
                       "' (known: layout, events, seed, emin, emax, theta, particle, escale, "
                       "dscale, hard, threads)"));
    }
  }
  absl::Status valid = ValidateToyMcConfig(c);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("toy MC spec '", BoundedField(spec), "': ", valid.message()));
  }
  return c;
}

std::string FormatToyMcSpec(const ToyMcConfig& c) {
  const bool variable = c.layout == Layout::kVariableAngle3DGan;
  std::string s =
      absl::StrCat("toymc:layout=", variable ? "51" : "25", ",events=", c.events, ",seed=", c.seed,
                   ",emin=", Num(c.energy_min_gev), ",emax=", Num(c.energy_max_gev));
  if (variable) absl::StrAppend(&s, ",theta=", Deg(c.theta_min_rad), ":", Deg(c.theta_max_rad));
  absl::StrAppend(&s, ",particle=", c.particle);
  if (c.energy_scale != 1.0) absl::StrAppend(&s, ",escale=", Num(c.energy_scale));
  if (c.depth_scale != 1.0) absl::StrAppend(&s, ",dscale=", Num(c.depth_scale));
  if (c.hard) absl::StrAppend(&s, ",hard=1");
  return s;
}

}  // namespace gantry::showers
