// BaselineSampler: a reference generator with no network. It draws the training data's mean shower
// for the primary energy E, E (a + b ln e) per cell with e = E / 100 GeV, plus its leading
// principal modes with normal weights, clamped at 0; the `spots` kind then replaces each cell's
// expected energy mu by s Poisson(mu / s), s one spot energy fitted to the data's number of hit
// cells. What a trained generator has to beat (docs/MODELS.md "Baselines"). Torch-free; a built
// sampler is immutable and thread-safe.
#ifndef GANTRY_WORKERS_BASELINE_BASELINE_SAMPLER_H_
#define GANTRY_WORKERS_BASELINE_BASELINE_SAMPLER_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jobspec/presets.h"
#include "showers/shower_set.h"

namespace gantry::baseline {

// The kinds and their job-spec presets ("baseline-template", "baseline-spots",
// "baseline-spots-smeared"): jobspec/presets.h.
using jobspec::BaselineKind;
using jobspec::HasSpots;
using jobspec::SpotShape;
using jobspec::BaselineKindOfPreset;
using jobspec::BaselinePresetName;

inline constexpr int kDefaultBaselineModes = 2;
inline constexpr int kMaxBaselineModes = 16;
// Grids up to 2^20 cells (51x51x25 has 65,025); what a checkpoint may declare.
inline constexpr int64_t kMaxBaselineCells = int64_t{1} << 20;
// Events fitted at most (evenly spread over the data), as condition_fit's template.
inline constexpr int64_t kBaselineFitEvents = 2000;

// Everything a fitted baseline is; what its checkpoint stores. Cell values are fractions of the
// primary energy (GeV per GeV): condition_fit's shower template, in preprocessed units (GeV x 100
// over E / 100), is 10^4 times a, b and sigma_k mode_k on the 25x25x25 grid.
struct BaselineParameters {
  BaselineKind kind = BaselineKind::kSpots;
  std::array<int64_t, 3> grid{25, 25, 25};  // (x, y, z) as ShowerSet::shape
  // Per cell, the least-squares line cell / E = a + b ln e over the fitted events (b = 0 for one
  // beam energy).
  std::vector<float> a, b;
  // modes[k], per cell: the k-th principal direction of the events' deviations from the line (unit
  // length, its largest entry positive); sigma[k] the standard deviation along it (0, with a zero
  // direction, where the data has fewer independent deviations).
  std::vector<std::vector<float>> modes;
  std::vector<double> sigma;
  double spot_gev = 0;  // kSpots, kSpotsSmeared: the mean energy of one spot (> 0); kTemplate: 0
  // What it was fitted to: the events' energy range, their number and their mean number of
  // non-zero cells.
  double energy_min_gev = 0;
  double energy_max_gev = 0;
  int64_t fit_events = 0;
  double data_nonzero_cells = 0;

  int64_t cells() const { return grid[0] * grid[1] * grid[2]; }
};

// INVALID_ARGUMENT naming the first field out of bounds or inconsistent (grid, sizes, non-finite
// values, a spot energy that does not fit the kind).
absl::Status ValidateBaselineParameters(const BaselineParameters& p);

struct BaselineFitOptions {
  BaselineKind kind = BaselineKind::kSpots;
  int modes = kDefaultBaselineModes;  // 0..kMaxBaselineModes
  int64_t max_events = kBaselineFitEvents;
};

// The spot energy s for which sum over cells of 1 - exp(-mu / s), the expected number of non-zero
// cells of s Poisson(mu / s), averaged over `showers` showers whose expected cells are `mu` (all
// showers' cells in one vector; cells <= 0 never hit), equals `target` (the data's mean number of
// non-zero cells). In mu's units.
double FitSpotEnergy(const std::vector<float>& mu, int64_t showers, double target);

// Replaces each of the `n` expected cell energies mu (GeV) of shower `index` of a request with
// `seed` by the deposit of Poisson(mu / spot_gev) spots, drawn from the shower's own stream: the
// same shower whatever the batch (the spots baseline's, and a generator's with spot sampling).
// spot_shape 0: each spot deposits spot_gev (the cell is spot_gev x the count); a > 0: each spot
// deposits Gamma(a, spot_gev / a), the cell's n spots Gamma(n a, spot_gev / a) (ModelConfig::
// generator_spot_shape). spot_gev > 0.
void DrawSpots(double spot_gev, uint64_t seed, uint64_t index, float* cells, int64_t n,
               double spot_shape = 0);

class BaselineSampler {
 public:
  // Fits to `rows` of `showers` (GeV cells; all rows when empty), at most options.max_events of
  // them spread evenly; events without a positive, finite primary energy are skipped. The spot
  // energy (kSpots) is the one for which the mean number of non-zero cells of 256 drawn showers at
  // the fitted events' energies equals the data's. INVALID_ARGUMENT: no usable event, all cells
  // empty, a row outside the set, modes out of 0..kMaxBaselineModes, a grid of more than
  // kMaxBaselineCells cells.
  static absl::StatusOr<BaselineSampler> Fit(const showers::ShowerSet& showers,
                                             const std::vector<int64_t>& rows,
                                             const BaselineFitOptions& options);
  // A sampler of stored parameters (ValidateBaselineParameters).
  static absl::StatusOr<BaselineSampler> Create(BaselineParameters parameters);

  // Shower `index` of seed `seed` at `energy_gev` into `out` (cells() floats, GeV, in ShowerSet
  // order). Depends on (seed, index, energy) only, so a shower is the same in any batch. A
  // non-positive or non-finite energy gives an empty shower. Energies outside the fitted range
  // extrapolate the line.
  void Draw(double energy_gev, uint64_t seed, uint64_t index, float* out) const;
  // The same without the spots (the expected cell energies of the shower, also for kSpots).
  void DrawExpected(double energy_gev, uint64_t seed, uint64_t index, float* out) const;
  // One shower per energy: shower i is Draw(energy_gev[i], seed, i); fixed-angle layout.
  showers::ShowerSet Sample(const std::vector<float>& energy_gev, uint64_t seed) const;

  const BaselineParameters& parameters() const { return p_; }
  int64_t cells() const { return p_.cells(); }
  // One line for logs: kind, modes and their sigmas, spot energy, events.
  std::string Describe() const;

 private:
  explicit BaselineSampler(BaselineParameters p) : p_(std::move(p)) {}

  BaselineParameters p_;
};

}  // namespace gantry::baseline

#endif  // GANTRY_WORKERS_BASELINE_BASELINE_SAMPLER_H_
