// FieldMetrics: the field-standard scores of a generated shower sample against Monte Carlo
// (CaloChallenge 2022, reference section G), each beside its floor, the same score between two
// independent Monte Carlo samples: classifier AUCs on high-level features and on cells,
// separation power per high-level feature, a Frechet distance on the high-level features, and
// occupancy and spreads as ratios to the Monte Carlo's.
#ifndef GANTRY_WORKERS_PHYSICS_FIELD_METRICS_H_
#define GANTRY_WORKERS_PHYSICS_FIELD_METRICS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "showers/shower_set.h"
#include "workers/physics/two_sample.h"

namespace gantry::physics {

// The cell classifier's defaults: the high-level one's with 32 hidden units (its first layer has
// an input per cell) and one scale for all inputs.
inline ClassifierOptions CellsClassifierDefaults() {
  ClassifierOptions o;
  o.hidden = 32;
  o.scale_per_input = false;
  return o;
}

struct FieldMetricsOptions {
  double hit_threshold_gev = 3e-4;
  int feature_bins = 30;
  // The classifier on the high-level features (and log E_primary).
  ClassifierOptions features_classifier;
  // The classifier on the cells, log(1 + E_cell / hit threshold), and log E_primary; off when
  // cells_classifier is false.
  bool cells_classifier = true;
  ClassifierOptions cells_classifier_options = CellsClassifierDefaults();
  // At most this many events of each sample are scored, taken at an even stride.
  int64_t max_events = 5000;
  // The cell classifier takes at most this many cell values of each sample (fewer events for
  // larger grids): 32M values are 2,000 showers of 25x25x25 (128 MiB of floats per sample).
  int64_t max_cell_values = int64_t{32} << 20;
};

// Scores `generated` against `reference`. Every key K has K_floor: the same score of
// `second_reference` against `reference`. Without a second reference, the reference's even events
// are the reference and its odd events the second reference. The three samples are cut to one
// size n (the smallest; events at an even stride), reported as field_events (field_cell_events
// for the cell classifier). Keys:
//   auc_features, auc_features_spread (over classifier seeds); auc_cells, auc_cells_spread;
//   fpd: Frechet distance on the standardised high-level features, extrapolated to infinite
//     samples (FrechetDistanceAtInfinity);
//   sep_mean: separation power averaged over all high-level features; sep_<group>: averaged over
//     a group (layer_energy, layer_centroid_x, ..., sampling_fraction, hits, nonzero_cells,
//     shower_max);
//   nonzero_cells_ratio: mean non-zero cells per shower, generated over reference (also
//     nonzero_cells_reference and nonzero_cells_generated, without floor);
//   hits_spread_ratio, sampling_fraction_spread_ratio, shower_max_spread_ratio: standard
//     deviations over showers, generated over reference.
// INVALID_ARGUMENT for mismatched layouts or shapes, fewer than 20 events in a sample (10 per
// half without a second reference), or bad options.
absl::StatusOr<std::map<std::string, double>> FieldMetrics(
    const showers::ShowerSet& reference, const showers::ShowerSet& generated,
    const showers::ShowerSet* second_reference, const FieldMetricsOptions& options);

}  // namespace gantry::physics

#endif  // GANTRY_WORKERS_PHYSICS_FIELD_METRICS_H_
