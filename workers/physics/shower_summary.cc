#include "workers/physics/shower_summary.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "base/status_macros.h"
#include "showers/shower_file_reader.h"

namespace gantry::physics {

Spread ShowerSummary::Get(const Sums& s) {
  Spread out;
  out.n = s.n;
  if (s.n == 0) return out;
  const double n = static_cast<double>(s.n);
  out.mean = s.sum / n;
  out.stddev = s.n > 1 ? std::sqrt(std::max(0.0, (s.sum2 - s.sum * s.sum / n) / (n - 1))) : 0.0;
  out.error = out.stddev / std::sqrt(n);
  return out;
}

void ShowerSummary::Add(const showers::ShowerSet& set) {
  const bool calo = set.layout == showers::Layout::kCaloChallenge;
  const int64_t nx = set.shape[0], ny = set.shape[1], nz = set.shape[2];
  const int64_t layers = calo ? nx : nz;
  std::vector<double> depth(static_cast<size_t>(layers));
  for (int64_t e = 0; e < set.events(); ++e) {
    std::fill(depth.begin(), depth.end(), 0.0);
    const float* cells = set.event(e);
    double total = 0;
    int64_t idx = 0;
    for (int64_t x = 0; x < nx; ++x) {
      for (int64_t y = 0; y < ny; ++y) {
        for (int64_t z = 0; z < nz; ++z, ++idx) {
          const double v = cells[idx];
          if (!(v > 0) || !std::isfinite(v)) {
            invalid_cells_ += !(v == 0);  // NaN, infinity or negative
            continue;
          }
          depth[calo ? x : z] += v;
          total += v;
        }
      }
    }
    const double energy = set.energy_gev[e];
    energy_min_ = std::min(energy_min_, energy);
    energy_max_ = std::max(energy_max_, energy);
    ++events_;
    sf_.Add(energy > 0 ? total / energy : 0.0);
    if (!(total > 0)) {
      ++empty_events_;
      continue;
    }
    max_layer_.Add(
        static_cast<double>(std::max_element(depth.begin(), depth.end()) - depth.begin()));
    double centroid = 0;
    for (int64_t l = 0; l < layers; ++l) centroid += static_cast<double>(l) * depth[l];
    centroid_.Add(centroid / total);
  }
}

absl::StatusOr<ShowerSummary> SummariseShowerFile(const std::string& path, int64_t block_events) {
  // One open file for the whole pass (not one open per block).
  ASSIGN_OR_RETURN(std::unique_ptr<showers::ShowerFileReader> reader,
                   showers::ShowerFileReader::Open(path));
  ShowerSummary summary;
  const int64_t block_bytes = std::max<int64_t>(1, block_events) * reader->cells_per_event() *
                              static_cast<int64_t>(sizeof(float));
  RETURN_IF_ERROR(reader->ForEachBlock(block_bytes,
                                       [&](int64_t, const showers::ShowerSet& set) -> absl::Status {
                                         summary.Add(set);
                                         return absl::OkStatus();
                                       }));
  return summary;
}

}  // namespace gantry::physics
