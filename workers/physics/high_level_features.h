// HighLevelFeatures: the per-shower high-level features the field scores generators on
// (CaloChallenge 2022, reference section G): per-layer energies, per-layer centroid and width in
// the two transverse directions, sampling fraction, hits, non-zero cells and shower maximum, one
// row per event.
#ifndef GANTRY_WORKERS_PHYSICS_HIGH_LEVEL_FEATURES_H_
#define GANTRY_WORKERS_PHYSICS_HIGH_LEVEL_FEATURES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "showers/shower_set.h"

namespace gantry::physics {

// A table of events x features, row-major, with the feature names and the group each belongs to
// ("layer_energy", "layer_centroid_x", ..., or the feature's own name for the single ones).
struct FeatureTable {
  std::vector<std::string> names;
  std::vector<std::string> groups;
  int64_t events = 0;
  std::vector<double> values;  // events x names.size()
  // The primary energy of each event (GeV): a condition, not a feature.
  std::vector<double> energy_gev;

  int64_t features() const { return static_cast<int64_t>(names.size()); }
  double at(int64_t event, int64_t feature) const { return values[event * features() + feature]; }
};

// The features of every event of `set` (3DGAN grids: depth z, transverse x and y; CaloChallenge:
// depth = layer, transverse alpha and r). Per layer: the energy (GeV), and the deposit-weighted
// centroid and width (standard deviation) along each transverse axis in cells (0 for an empty
// layer). Then sampling_fraction (sum / E_primary; 0 for E_primary 0), hits (cells above
// `hit_threshold_gev`), nonzero_cells (cells above 0) and shower_max (the depth layer with the
// largest deposit). NaN, infinite and negative cells are read as 0, as validation does.
FeatureTable HighLevelFeatures(const showers::ShowerSet& set, double hit_threshold_gev);

}  // namespace gantry::physics

#endif  // GANTRY_WORKERS_PHYSICS_HIGH_LEVEL_FEATURES_H_
