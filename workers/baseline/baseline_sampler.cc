#include "workers/baseline/baseline_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/random_bits.h"

namespace gantry::baseline {
namespace {

constexpr double kEnergyScaleGev = 100.0;  // e = E / 100 GeV, as the 3DGAN conditioning
// The rows kept for the modes: 2,000 events of 25^3 cells, about 1,000 of 51x51x25.
constexpr int64_t kModeFitBytes = int64_t{128} << 20;
constexpr int64_t kSpotFitShowers = 256;
constexpr uint64_t kSpotFitSeed = 0x5907;

using random_bits::SplitMix64;

// xoshiro256++ seeded from (seed, index) through splitmix64 (base/random_bits.h): one independent
// stream per shower.
class ShowerRng {
 public:
  ShowerRng(uint64_t seed, uint64_t index) : bits_(FromSeedAndIndex(seed, index)) {}

  uint64_t Next() { return bits_(); }

  // In [0, 1), 53 random bits.
  double Uniform() { return random_bits::UnitInterval(Next()); }

  double Normal() {                    // Box-Muller; one of the pair
    const double u = 1.0 - Uniform();  // (0, 1]
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * Uniform());
  }

  // Poisson(lambda): inversion below 10, else PTRS (Hoermann 1993, as numpy).
  int64_t Poisson(double lambda) {
    if (!(lambda > 0)) return 0;
    if (lambda < 10) {
      double p = std::exp(-lambda), cumulative = p;
      const double u = Uniform();
      int64_t k = 0;
      while (u > cumulative && k < 1000) {
        ++k;
        p *= lambda / static_cast<double>(k);
        cumulative += p;
      }
      return k;
    }
    const double slam = std::sqrt(lambda), loglam = std::log(lambda);
    const double b = 0.931 + 2.53 * slam;
    const double a = -0.059 + 0.02483 * b;
    const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
    const double vr = 0.9277 - 3.6224 / (b - 2);
    for (;;) {
      const double u = Uniform() - 0.5, v = Uniform();
      const double us = 0.5 - std::fabs(u);
      const double k = std::floor((2 * a / us + b) * u + lambda + 0.43);
      if (us >= 0.07 && v <= vr) return static_cast<int64_t>(k);
      if (k < 0 || (us < 0.013 && v > us)) continue;
      if (std::log(v) + std::log(inv_alpha) - std::log(a / (us * us) + b) <=
          -lambda + k * loglam - std::lgamma(k + 1)) {
        return static_cast<int64_t>(k);
      }
    }
  }

  double UniformOpen() { return 1.0 - Uniform(); }  // (0, 1]
  // Gamma(k, 1), k > 0.
  double Gamma(double k) { return random_bits::MarsagliaTsangGamma(*this, k); }

 private:
  static random_bits::Xoshiro256pp FromSeedAndIndex(uint64_t seed, uint64_t index) {
    uint64_t mix = seed;
    return random_bits::Xoshiro256pp::FromSplitMix(SplitMix64(mix) ^
                                                   (index * 0xD1B54A32D192ED03ULL));
  }
  random_bits::Xoshiro256pp bits_;
};

// Evenly spread picks of at most `limit` of `n` positions (as condition_fit).
std::vector<int64_t> SpreadPicks(int64_t n, int64_t limit) {
  std::vector<int64_t> picks;
  const int64_t k = std::min(n, limit);
  for (int64_t i = 0; i < k; ++i) picks.push_back(i * n / k);
  return picks;
}

// Eigen-decomposition of a small symmetric matrix (cyclic Jacobi): eigenvalues in `values`,
// eigenvectors in the columns of `vectors` (row-major n x n), sorted by descending eigenvalue.
void SymmetricEigen(std::vector<double> m, int n, std::vector<double>* values,
                    std::vector<double>* vectors) {
  std::vector<double> v(static_cast<size_t>(n * n), 0.0);
  for (int i = 0; i < n; ++i) v[i * n + i] = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) off += m[p * n + q] * m[p * n + q];
    if (off < 1e-30) break;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) {
        if (m[p * n + q] == 0) continue;
        const double theta = (m[q * n + q] - m[p * n + p]) / (2 * m[p * n + q]);
        const double t =
            (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) {  // columns p, q
          const double mkp = m[k * n + p], mkq = m[k * n + q];
          m[k * n + p] = c * mkp - s * mkq;
          m[k * n + q] = s * mkp + c * mkq;
        }
        for (int k = 0; k < n; ++k) {  // rows p, q
          const double mpk = m[p * n + k], mqk = m[q * n + k];
          m[p * n + k] = c * mpk - s * mqk;
          m[q * n + k] = s * mpk + c * mqk;
        }
        for (int k = 0; k < n; ++k) {
          const double vkp = v[k * n + p], vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int i, int j) { return m[i * n + i] > m[j * n + j]; });
  values->assign(n, 0.0);
  vectors->assign(static_cast<size_t>(n * n), 0.0);
  for (int j = 0; j < n; ++j) {
    (*values)[j] = m[order[j] * n + order[j]];
    for (int k = 0; k < n; ++k) (*vectors)[k * n + j] = v[k * n + order[j]];
  }
}

// The `modes` leading principal components of the rows' covariance (rows: n deviations of
// `cells` values each, row-major) by subspace iteration with Rayleigh-Ritz: unit directions and
// their standard deviations (population), largest entry positive.
void LeadingModes(const std::vector<float>& rows, int64_t n, int64_t cells, int modes,
                  std::vector<std::vector<float>>* directions, std::vector<double>* sigma) {
  directions->assign(modes, std::vector<float>(static_cast<size_t>(cells), 0.0f));
  sigma->assign(modes, 0.0);
  if (modes == 0 || n < 2) return;
  const int width = static_cast<int>(std::min<int64_t>(modes + 2, n));
  std::vector<std::vector<double>> basis(width, std::vector<double>(cells));
  uint64_t state = 0x6a09e667f3bcc909ULL;  // fixed start: every process fits the same modes
  for (auto& column : basis) {
    for (double& x : column) x = random_bits::UnitInterval(SplitMix64(state)) - 0.5;
  }
  auto orthonormalize = [&] {
    for (int j = 0; j < width; ++j) {
      for (int pass = 0; pass < 2; ++pass) {
        for (int i = 0; i < j; ++i) {
          const double dot =
              std::inner_product(basis[i].begin(), basis[i].end(), basis[j].begin(), 0.0);
          for (int64_t c = 0; c < cells; ++c) basis[j][c] -= dot * basis[i][c];
        }
      }
      const double norm =
          std::sqrt(std::inner_product(basis[j].begin(), basis[j].end(), basis[j].begin(), 0.0));
      for (double& x : basis[j]) x = norm > 0 ? x / norm : 0.0;
    }
  };
  orthonormalize();
  std::vector<double> projected(static_cast<size_t>(n * width));  // rows x basis
  std::vector<double> values, rotation, previous;
  for (int iteration = 0; iteration < 200; ++iteration) {
    for (int64_t r = 0; r < n; ++r) {
      const float* row = rows.data() + r * cells;
      for (int j = 0; j < width; ++j) {
        const double* v = basis[j].data();
        double dot = 0;
        for (int64_t c = 0; c < cells; ++c) dot += row[c] * v[c];
        projected[r * width + j] = dot;
      }
    }
    std::vector<double> small(static_cast<size_t>(width * width), 0.0);
    for (int64_t r = 0; r < n; ++r) {
      for (int i = 0; i < width; ++i) {
        for (int j = 0; j < width; ++j) {
          small[i * width + j] += projected[r * width + i] * projected[r * width + j] / n;
        }
      }
    }
    SymmetricEigen(small, width, &values, &rotation);
    // The basis rotated onto the Ritz vectors.
    std::vector<std::vector<double>> ritz(width, std::vector<double>(cells, 0.0));
    for (int j = 0; j < width; ++j) {
      for (int i = 0; i < width; ++i) {
        const double w = rotation[i * width + j];
        for (int64_t c = 0; c < cells; ++c) ritz[j][c] += w * basis[i][c];
      }
    }
    bool converged = iteration >= 4 && previous.size() == values.size();
    for (int k = 0; converged && k < modes && k < width; ++k) {
      converged = std::fabs(values[k] - previous[k]) <= 1e-10 * std::max(values[0], 1e-300);
    }
    previous = values;
    basis = std::move(ritz);
    if (converged || iteration == 199) break;
    // Next subspace: R^T R applied to the basis.
    std::vector<std::vector<double>> next(width, std::vector<double>(cells, 0.0));
    for (int64_t r = 0; r < n; ++r) {
      const float* row = rows.data() + r * cells;
      for (int j = 0; j < width; ++j) {
        double weight = 0;
        for (int i = 0; i < width; ++i)
          weight += projected[r * width + i] * rotation[i * width + j];
        double* out = next[j].data();
        for (int64_t c = 0; c < cells; ++c) out[c] += weight * row[c];
      }
    }
    basis = std::move(next);
    orthonormalize();
  }
  const double largest = values.empty() ? 0 : values[0];
  for (int k = 0; k < modes && k < width; ++k) {
    if (!(values[k] > 1e-12 * largest) || !(largest > 0)) break;
    const std::vector<double>& v = basis[k];
    size_t peak = 0;
    for (size_t c = 1; c < v.size(); ++c) {
      if (std::fabs(v[c]) > std::fabs(v[peak])) peak = c;
    }
    const double sign = v[peak] < 0 ? -1.0 : 1.0;
    for (int64_t c = 0; c < cells; ++c) (*directions)[k][c] = static_cast<float>(sign * v[c]);
    (*sigma)[k] = std::sqrt(values[k]);
  }
}

bool AllFinite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

}  // namespace

// Bisection in ln s over a histogram of ln mu.
double FitSpotEnergy(const std::vector<float>& mu, int64_t showers, double target) {
  constexpr double kLo = -40, kHi = 15, kWidth = 0.005;
  const int bins = static_cast<int>((kHi - kLo) / kWidth);
  std::vector<double> counts(bins, 0.0);
  for (float m : mu) {
    if (!(m > 0)) continue;
    const int bin = std::clamp(static_cast<int>((std::log(m) - kLo) / kWidth), 0, bins - 1);
    counts[bin] += 1;
  }
  auto expected_hits = [&](double log_s) {
    double hits = 0;
    for (int i = 0; i < bins; ++i) {
      if (counts[i] == 0) continue;
      hits += counts[i] * -std::expm1(-std::exp(kLo + (i + 0.5) * kWidth - log_s));
    }
    return hits / static_cast<double>(showers);
  };
  double lo = kLo, hi = kHi;  // expected_hits falls with ln s
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (expected_hits(mid) > target ? lo : hi) = mid;
  }
  return std::exp(0.5 * (lo + hi));
}

absl::Status ValidateBaselineParameters(const BaselineParameters& p) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("baseline: ", what));
  };
  for (int64_t n : p.grid) {
    if (n < 1 || n > kMaxBaselineCells) return bad("grid sizes must be in 1..2^20");
  }
  if (p.cells() > kMaxBaselineCells) {
    return bad(absl::StrCat("a grid of ", p.cells(), " cells is over ", kMaxBaselineCells));
  }
  const size_t cells = static_cast<size_t>(p.cells());
  if (p.a.size() != cells || p.b.size() != cells) return bad("a and b need one value per cell");
  if (!AllFinite(p.a) || !AllFinite(p.b)) return bad("a and b must be finite");
  if (p.modes.size() > static_cast<size_t>(kMaxBaselineModes) || p.sigma.size() != p.modes.size()) {
    return bad(absl::StrCat("at most ", kMaxBaselineModes, " modes, each with its sigma"));
  }
  for (size_t k = 0; k < p.modes.size(); ++k) {
    if (p.modes[k].size() != cells || !AllFinite(p.modes[k])) {
      return bad(absl::StrCat("mode ", k, " needs one finite value per cell"));
    }
    if (!(p.sigma[k] >= 0) || !std::isfinite(p.sigma[k])) {
      return bad(absl::StrCat("sigma of mode ", k, " must be finite and >= 0"));
    }
  }
  const bool spots = HasSpots(p.kind);
  if (spots ? !(p.spot_gev > 0 && std::isfinite(p.spot_gev)) : p.spot_gev != 0) {
    return bad(spots ? "the spots kind needs a finite spot energy > 0"
                     : "the template kind has no spot energy");
  }
  if (!(p.energy_min_gev > 0 && p.energy_min_gev <= p.energy_max_gev &&
        std::isfinite(p.energy_max_gev))) {
    return bad("the fitted energy range must satisfy 0 < min <= max");
  }
  if (p.fit_events < 1 || !(p.data_nonzero_cells >= 0) ||
      !(p.data_nonzero_cells <= static_cast<double>(cells))) {
    return bad("fit_events must be >= 1 and data_nonzero_cells in 0..cells");
  }
  return absl::OkStatus();
}

absl::StatusOr<BaselineSampler> BaselineSampler::Create(BaselineParameters parameters) {
  if (absl::Status valid = ValidateBaselineParameters(parameters); !valid.ok()) return valid;
  return BaselineSampler(std::move(parameters));
}

absl::StatusOr<BaselineSampler> BaselineSampler::Fit(const showers::ShowerSet& showers,
                                                     const std::vector<int64_t>& rows,
                                                     const BaselineFitOptions& options) {
  if (options.modes < 0 || options.modes > kMaxBaselineModes) {
    return absl::InvalidArgumentError(absl::StrCat("baseline: modes is ", options.modes,
                                                   "; it must be in 0..", kMaxBaselineModes));
  }
  if (options.max_events < 1) {
    return absl::InvalidArgumentError("baseline: max_events must be >= 1");
  }
  BaselineParameters p;
  p.kind = options.kind;
  p.grid = showers.shape;
  const int64_t cells = showers.cells_per_event();
  if (cells < 1 || cells > kMaxBaselineCells ||
      showers.cells.size() != static_cast<size_t>(showers.events() * cells)) {
    return absl::InvalidArgumentError(absl::StrCat("baseline: the showers' grid of ", cells,
                                                   " cells does not fit (1..", kMaxBaselineCells,
                                                   " cells, one block per event)"));
  }
  std::vector<int64_t> all = rows;
  if (all.empty()) {
    all.resize(static_cast<size_t>(showers.events()));
    std::iota(all.begin(), all.end(), 0);
  }
  std::vector<int64_t> usable;
  for (int64_t row : all) {
    if (row < 0 || row >= showers.events()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "baseline: event ", row, " is outside the set's ", showers.events(), " events"));
    }
    const double e = showers.energy_gev[row];
    if (e > 0 && std::isfinite(e)) usable.push_back(row);
  }
  std::vector<int64_t> picked;
  for (int64_t i : SpreadPicks(static_cast<int64_t>(usable.size()), options.max_events)) {
    picked.push_back(usable[i]);
  }
  if (picked.empty()) {
    return absl::InvalidArgumentError(
        "baseline: no event with a positive primary energy to fit the template to");
  }
  const int64_t n = static_cast<int64_t>(picked.size());

  // The line per cell: running sums of y = cell / E against x = ln e.
  std::vector<double> sum_y(cells, 0.0), sum_xy(cells, 0.0);
  double sum_x = 0, sum_xx = 0, nonzero = 0;
  p.energy_min_gev = p.energy_max_gev = showers.energy_gev[picked[0]];
  const int64_t max_rows = std::max<int64_t>(2, kModeFitBytes / (cells * 4));
  const int64_t row_stride = (n + max_rows - 1) / max_rows;
  std::vector<float> kept;  // every row_stride-th event's y, for the modes
  std::vector<double> kept_x;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = picked[i];
    const double energy = showers.energy_gev[row];
    p.energy_min_gev = std::min(p.energy_min_gev, energy);
    p.energy_max_gev = std::max(p.energy_max_gev, energy);
    const double x = std::log(energy / kEnergyScaleGev);
    const float* event = showers.event(row);
    const bool keep = options.modes > 0 && i % row_stride == 0;
    if (keep) {
      kept.resize(kept.size() + static_cast<size_t>(cells));
      kept_x.push_back(x);
    }
    float* kept_row = keep ? kept.data() + kept.size() - cells : nullptr;
    for (int64_t c = 0; c < cells; ++c) {
      const float cell = std::isfinite(event[c]) && event[c] > 0 ? event[c] : 0.0f;
      if (kept_row != nullptr) kept_row[c] = static_cast<float>(cell / energy);
      if (cell == 0) continue;
      nonzero += 1;
      const double y = cell / energy;
      sum_y[c] += y;
      sum_xy[c] += x * y;
    }
    sum_x += x;
    sum_xx += x * x;
  }
  if (nonzero == 0) {
    return absl::InvalidArgumentError("baseline: every cell of the fitted events is empty");
  }
  const double mean_x = sum_x / n;
  const double var_x = sum_xx / n - mean_x * mean_x;
  const bool slope = var_x > 1e-9;  // a spread of energies, not one beam energy
  p.a.resize(cells);
  p.b.resize(cells);
  for (int64_t c = 0; c < cells; ++c) {
    const double mean_y = sum_y[c] / n;
    const double b = slope ? (sum_xy[c] / n - mean_x * mean_y) / var_x : 0.0;
    p.a[c] = static_cast<float>(mean_y - b * mean_x);
    p.b[c] = static_cast<float>(b);
  }
  p.fit_events = n;
  p.data_nonzero_cells = nonzero / static_cast<double>(n);

  // The modes, from the kept events' deviations from the line.
  const int64_t kept_n = static_cast<int64_t>(kept_x.size());
  for (int64_t r = 0; r < kept_n; ++r) {
    float* row = kept.data() + r * cells;
    for (int64_t c = 0; c < cells; ++c) row[c] -= p.a[c] + p.b[c] * static_cast<float>(kept_x[r]);
  }
  LeadingModes(kept, kept_n, cells, options.modes, &p.modes, &p.sigma);
  kept.clear();
  kept.shrink_to_fit();

  if (HasSpots(p.kind)) {
    // Expected cells of showers drawn at the fitted events' energies, then the spot energy.
    BaselineParameters expected = p;
    expected.kind = BaselineKind::kTemplate;
    const BaselineSampler draw(std::move(expected));
    const int64_t m = std::min<int64_t>(n, kSpotFitShowers);
    std::vector<float> mu(static_cast<size_t>(m * cells));
    const std::vector<int64_t> energies = SpreadPicks(n, m);
    for (int64_t i = 0; i < m; ++i) {
      draw.DrawExpected(showers.energy_gev[picked[energies[i]]], kSpotFitSeed, i,
                        mu.data() + i * cells);
    }
    p.spot_gev = FitSpotEnergy(mu, m, p.data_nonzero_cells);
  }
  if (absl::Status valid = ValidateBaselineParameters(p); !valid.ok()) {
    return absl::InternalError(absl::StrCat("baseline fit: ", valid.message()));
  }
  return BaselineSampler(std::move(p));
}

void BaselineSampler::DrawExpected(double energy_gev, uint64_t seed, uint64_t index,
                                   float* out) const {
  const int64_t cells = p_.cells();
  if (!(energy_gev > 0) || !std::isfinite(energy_gev)) {
    std::fill(out, out + cells, 0.0f);
    return;
  }
  ShowerRng rng(seed, index);
  std::vector<double> weights(p_.modes.size());
  for (size_t k = 0; k < weights.size(); ++k) weights[k] = rng.Normal() * p_.sigma[k];
  const double x = std::log(energy_gev / kEnergyScaleGev);
  for (int64_t c = 0; c < cells; ++c) {
    double y = p_.a[c] + p_.b[c] * x;
    for (size_t k = 0; k < weights.size(); ++k) y += weights[k] * p_.modes[k][c];
    out[c] = static_cast<float>(std::max(0.0, energy_gev * y));
  }
}

void BaselineSampler::Draw(double energy_gev, uint64_t seed, uint64_t index, float* out) const {
  DrawExpected(energy_gev, seed, index, out);
  if (HasSpots(p_.kind)) {
    DrawSpots(p_.spot_gev, seed, index, out, p_.cells(), SpotShape(p_.kind));
  }
}

void DrawSpots(double spot_gev, uint64_t seed, uint64_t index, float* cells, int64_t n,
               double spot_shape) {
  // A stream of its own (the index's complement): the baseline's modes draw from (seed, index).
  ShowerRng rng(seed, ~index);
  const double s = spot_gev;
  for (int64_t c = 0; c < n; ++c) {
    if (!(cells[c] > 0)) continue;
    const int64_t spots = rng.Poisson(cells[c] / s);
    if (spots == 0 || !(spot_shape > 0)) {
      cells[c] = static_cast<float>(s * static_cast<double>(spots));
    } else {
      const double a = spot_shape * static_cast<double>(spots);
      cells[c] = static_cast<float>(rng.Gamma(a) * s / spot_shape);
    }
  }
}

showers::ShowerSet BaselineSampler::Sample(const std::vector<float>& energy_gev,
                                           uint64_t seed) const {
  showers::ShowerSet set;
  set.layout = showers::Layout::kFixedAngle3DGan;
  set.shape = p_.grid;
  set.energy_gev = energy_gev;
  set.cells.resize(energy_gev.size() * static_cast<size_t>(p_.cells()));
  for (size_t i = 0; i < energy_gev.size(); ++i) Draw(energy_gev[i], seed, i, set.mutable_event(i));
  return set;
}

std::string BaselineSampler::Describe() const {
  return absl::StrFormat(
      "%s: template and %d modes (sigma %s per GeV of primary energy)%s, fitted to %d events of "
      "%.4g-%.4g GeV with %.1f non-zero cells each",
      BaselinePresetName(p_.kind), p_.modes.size(),
      absl::StrJoin(
          p_.sigma, ", ",
          [](std::string* out, double s) { absl::StrAppend(out, absl::StrFormat("%.3g", s)); }),
      HasSpots(p_.kind) ? absl::StrFormat(", spots of %.4g GeV", p_.spot_gev) : "",
      p_.fit_events, p_.energy_min_gev, p_.energy_max_gev, p_.data_nonzero_cells);
}

}  // namespace gantry::baseline
