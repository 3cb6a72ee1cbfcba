#include "workers/physics/binning.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gantry::physics {

std::vector<double> FeatureEdges(const std::vector<double>& reference, int bins) {
  double lo = *std::min_element(reference.begin(), reference.end());
  double hi = *std::max_element(reference.begin(), reference.end());
  double pad = 0.05 * (hi - lo);
  if (!(pad > 0)) pad = std::max(1e-9, 0.05 * std::fabs(lo));
  lo -= pad;
  hi += pad;
  std::vector<double> edges(bins + 1);
  for (int i = 0; i <= bins; ++i) edges[i] = lo + (hi - lo) * i / bins;
  return edges;
}

std::vector<double> NormalisedHistogram(const std::vector<double>& values,
                                        const std::vector<double>& edges) {
  const int bins = static_cast<int>(edges.size()) - 1;
  std::vector<double> h(bins, 0.0);
  for (double v : values) {
    // Clamped as a double: a far-off value must not overflow the int conversion.
    double b = (v - edges[0]) / (edges[bins] - edges[0]) * bins;
    if (std::isnan(b)) b = 0;
    h[static_cast<int>(std::clamp(b, 0.0, bins - 1.0))] += 1.0;
  }
  const double total = std::accumulate(h.begin(), h.end(), 0.0);
  if (total > 0) {
    for (double& x : h) x /= total;
  }
  return h;
}

}  // namespace gantry::physics
