// ShowerSummary: the headline physics of a shower sample (reference section D): mean sampling
// fraction and shower-maximum depth with their spreads, accumulated event by event so that a file
// of any size is summarised in bounded memory.
#ifndef GANTRY_WORKERS_PHYSICS_SHOWER_SUMMARY_H_
#define GANTRY_WORKERS_PHYSICS_SHOWER_SUMMARY_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "showers/shower_set.h"

namespace gantry::physics {

// Mean, standard deviation (the spread over events) and the standard error of the mean.
struct Spread {
  int64_t n = 0;
  double mean = 0, stddev = 0, error = 0;
};

class ShowerSummary {
 public:
  // Adds every event of `set`. Per event: SF = (sum of cells) / E_primary; the shower maximum is
  // the depth layer (z for 3DGAN grids, the layer axis for CaloChallenge) whose summed deposit is
  // largest; the longitudinal centroid is the deposit-weighted mean layer. Events without any
  // deposit count for SF (as 0) but not for the depth figures. NaN, infinite and negative cells
  // are invalid: counted (invalid_cells) and read as 0.
  void Add(const showers::ShowerSet& set);

  int64_t events() const { return events_; }
  int64_t empty_events() const { return empty_events_; }
  int64_t invalid_cells() const { return invalid_cells_; }
  double energy_min_gev() const { return energy_min_; }
  double energy_max_gev() const { return energy_max_; }
  Spread sampling_fraction() const { return Get(sf_); }
  Spread shower_max_layer() const { return Get(max_layer_); }
  Spread centroid_layer() const { return Get(centroid_); }

 private:
  struct Sums {
    int64_t n = 0;
    double sum = 0, sum2 = 0;
    void Add(double v) {
      ++n;
      sum += v;
      sum2 += v * v;
    }
  };
  static Spread Get(const Sums& s);

  int64_t events_ = 0, empty_events_ = 0, invalid_cells_ = 0;
  double energy_min_ = std::numeric_limits<double>::infinity();
  double energy_max_ = -std::numeric_limits<double>::infinity();
  Sums sf_, max_layer_, centroid_;
};

// Summarises an HDF5 shower file (any layout ReadShowerFile reads), `block_events` events at a
// time through one showers::ShowerFileReader. The errors of showers::ShowerFileReader.
absl::StatusOr<ShowerSummary> SummariseShowerFile(const std::string& path,
                                                  int64_t block_events = 1000);

}  // namespace gantry::physics

#endif  // GANTRY_WORKERS_PHYSICS_SHOWER_SUMMARY_H_
