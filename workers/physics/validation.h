// Validation: the physics comparison of generated showers with reference Monte Carlo (reference
// section D): sampling fraction, profiles, moments, angle, figure of merit and CaloChallenge
// separation power, per energy (and angle) bin, with the histograms they come from kept as data.
#ifndef GANTRY_WORKERS_PHYSICS_VALIDATION_H_
#define GANTRY_WORKERS_PHYSICS_VALIDATION_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "showers/shower_set.h"
#include "workers/physics/field_metrics.h"

namespace gantry::physics {

struct ValidationOptions {
  // Energy bins, first match wins: explicit edges [e0,e1), [e1,e2), ... (GeV); else centres +- half
  // width; else `default_energy_bins` equal-width bins over the reference sample's energy range.
  std::vector<double> energy_edges_gev;
  std::vector<double> energy_centres_gev;
  double energy_half_width_gev = 5.0;
  int default_energy_bins = 4;
  // Angle bins (variable-angle data only): centres +- half width; empty = all angles in one bin.
  std::vector<double> theta_centres_rad;
  double theta_half_width_rad = 0.1;
  // A cell counts as a hit above this deposit (GeV).
  double hit_threshold_gev = 3e-4;
  // Bins of the feature histograms behind the separation power.
  int feature_bins = 30;
  // Bins with fewer events than this in either sample are skipped (listed in
  // ValidationReport::skipped_bins).
  int64_t min_events_per_bin = 2;
  // The field-standard metrics of the whole samples (field_metrics.h: classifier AUCs, Frechet
  // distance, separation power per high-level feature, ratios, each with its MC floor), added to
  // ValidationReport::metrics. Skipped (field_events 0) when a sample is too small for them. Its
  // hit threshold and feature bins are taken from the fields above.
  bool field_metrics = true;
  FieldMetricsOptions field;
};

// One histogram pair (reference and generated) kept for the registry and for plots. Profiles are
// "mean per event" curves with edges at slice boundaries; distributions are normalised to unit sum.
struct Histogram {
  std::string
      name;  // e.g. "profile_z", "sampling_fraction", "cell_energy", "hits", "feature/total_energy"
  std::string x_label;        // e.g. "layer", "E_cell [GeV]"
  std::vector<double> edges;  // size = bins + 1
  std::vector<double> reference;
  std::vector<double> generated;
  // One standard error per entry (empty when unknown), and x values of an unbinned point series
  // (edges empty).
  std::vector<double> reference_error;
  std::vector<double> generated_error;
  std::vector<double> x;
  int energy_bin = -1;  // index into ValidationReport::bins; -1 for summaries across bins
};

// The metrics of one (energy, angle) bin. Every metric M comes with M_null: its expected value for
// two independent samples of the same distribution with these event counts (the statistical floor),
// estimated from the per-event spread. Relative errors are bounded: |a - b| / max(|a|, |b|) for
// means (0 when both are 0, 1 when one sample has no entries) and sum_i |a_i - b_i| / sum_i
// max(a_i, b_i) for profiles, so every relative error and its null lie in [0, 1].
struct BinMetrics {
  double energy_lo_gev = 0, energy_hi_gev = 0;
  double theta_lo_rad = 0, theta_hi_rad = 0;  // both 0 when not binned in angle
  int64_t reference_events = 0, generated_events = 0;
  // Keys: sf_reference, sf_generated, sf_relative_error (+ _null), eprof, eprof_x, eprof_y,
  // eprof_z, eprof_longitudinal, eprof_transverse, pos, pos_<axis>_mu1, pos_<axis>_mu2,
  // shower_max_relative_error, centroid_depth_relative_error (+ _null), ang, ang_reference
  // (variable angle only), fom (+ _null = pos_null + eprof_null (+ ang_reference)),
  // separation_power (mean over features) and separation_power/<feature> (+ _null).
  std::map<std::string, double> metrics;
};

// What ValidateShowers returns: report-wide metrics, per-bin metrics and the histograms behind
// them.
struct ValidationReport {
  // Means over bins of the per-bin metrics: sf_mre, eprof, eprof_longitudinal, eprof_transverse,
  // pos, ang, fom, separation_power (+ _null; ang's floor is ang_reference); the field metrics
  // (FieldMetrics's keys, with field_events); worst bin:
  // sf_relative_error_max, shower_max_relative_error, centroid_depth_relative_error (+ _null: the
  // expected worst bin of independent samples); bins_used; invalid_cells_reference,
  // invalid_cells_generated and invalid_events_generated (NaN, infinite or negative cells, read as
  // 0). Every value is finite.
  std::map<std::string, double> metrics;
  std::vector<BinMetrics> bins;
  // First the summaries across bins: sampling_fraction_per_bin and the point series
  // sampling_fraction_vs_energy (x = bin centre in GeV, standard errors of the mean); then per
  // bin: profile_<axis> (with standard errors of the mean), sampling_fraction, sparsity,
  // feature/<name> (with Poisson errors of the normalised counts), cell_energy.
  std::vector<Histogram> histograms;
  std::vector<std::string> skipped_bins;  // "energy 10-20 GeV: 1 reference, 0 generated events"
};

// Compares `generated` with `reference`. Both must have the same layout and shape. The field
// metrics' floors compare `second_reference`, an independent Monte Carlo sample of the same
// layout, with `reference`; without one, the reference's two halves. Any cell values
// are accepted (invalid ones are counted and read as 0). INVALID_ARGUMENT on a layout/shape
// mismatch, empty samples, a non-finite or negative primary energy or bad options;
// FAILED_PRECONDITION when no bin has enough events in both samples. Thread-safe (no mutable shared
// state).
absl::StatusOr<ValidationReport> ValidateShowers(
    const showers::ShowerSet& reference, const showers::ShowerSet& generated,
    const ValidationOptions& options, const showers::ShowerSet* second_reference = nullptr);

// Separation power 1/2 sum (h1 - h2)^2 / (h1 + h2) of two histograms with the same bins (normalised
// here), in [0, 1]; 0 when either is empty or the sizes differ.
double SeparationPower(const std::vector<double>& h1, const std::vector<double>& h2);

}  // namespace gantry::physics

#endif  // GANTRY_WORKERS_PHYSICS_VALIDATION_H_
