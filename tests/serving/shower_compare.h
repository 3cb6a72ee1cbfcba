// WorstRelativeDifference: how far apart two runs of the same showers are, for serving tests.
#ifndef GANTRY_TESTS_SERVING_SHOWER_COMPARE_H_
#define GANTRY_TESTS_SERVING_SHOWER_COMPARE_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace gantry::serving::testing {

// Largest |a - b| relative to the largest cell of its shower, over all showers (shower-major,
// `cells_per_shower` floats each); infinity when the sizes differ.
inline double WorstRelativeDifference(const std::vector<float>& a, const std::vector<float>& b,
                                      size_t cells_per_shower = 25 * 25 * 25) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t s = 0; s + cells_per_shower <= a.size(); s += cells_per_shower) {
    float peak = 0;
    double diff = 0;
    for (size_t i = s; i < s + cells_per_shower; ++i) {
      peak = std::max({peak, std::abs(a[i]), std::abs(b[i])});
      diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    }
    if (peak > 0) worst = std::max(worst, diff / peak);
  }
  return worst;
}

}  // namespace gantry::serving::testing

#endif  // GANTRY_TESTS_SERVING_SHOWER_COMPARE_H_
