#include "workers/physics/high_level_features.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"

namespace gantry::physics {

FeatureTable HighLevelFeatures(const showers::ShowerSet& set, double hit_threshold_gev) {
  const bool calo = set.layout == showers::Layout::kCaloChallenge;
  const int d = calo ? 0 : 2;                                  // depth axis
  const std::array<int, 2> t = calo ? std::array<int, 2>{1, 2}  // transverse axes
                                    : std::array<int, 2>{0, 1};
  const std::array<const char*, 2> t_name = calo ? std::array<const char*, 2>{"alpha", "r"}
                                                 : std::array<const char*, 2>{"x", "y"};
  const int64_t layers = set.shape[d];

  FeatureTable table;
  auto add = [&](std::string name, std::string group) {
    table.names.push_back(std::move(name));
    table.groups.push_back(std::move(group));
  };
  for (int64_t l = 0; l < layers; ++l) add(absl::StrFormat("layer_energy_%02d", l), "layer_energy");
  for (int a = 0; a < 2; ++a) {
    for (int64_t l = 0; l < layers; ++l) {
      add(absl::StrFormat("layer_centroid_%s_%02d", t_name[a], l),
          absl::StrFormat("layer_centroid_%s", t_name[a]));
    }
  }
  for (int a = 0; a < 2; ++a) {
    for (int64_t l = 0; l < layers; ++l) {
      add(absl::StrFormat("layer_width_%s_%02d", t_name[a], l),
          absl::StrFormat("layer_width_%s", t_name[a]));
    }
  }
  for (const char* single : {"sampling_fraction", "hits", "nonzero_cells", "shower_max"}) {
    add(single, single);
  }
  const int64_t nf = table.features();
  table.events = set.events();
  table.values.assign(static_cast<size_t>(table.events * nf), 0.0);
  table.energy_gev.assign(set.energy_gev.begin(), set.energy_gev.end());

  // Per layer: sum, and the first and second moments along each transverse axis.
  std::vector<double> sum(layers), m1[2], m2[2];
  for (int a = 0; a < 2; ++a) {
    m1[a].resize(layers);
    m2[a].resize(layers);
  }
  const int64_t n[3] = {set.shape[0], set.shape[1], set.shape[2]};
  constexpr double kMaxCell = std::numeric_limits<float>::max();
  for (int64_t e = 0; e < table.events; ++e) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int a = 0; a < 2; ++a) {
      std::fill(m1[a].begin(), m1[a].end(), 0.0);
      std::fill(m2[a].begin(), m2[a].end(), 0.0);
    }
    const float* cells = set.event(e);
    int64_t hits = 0, nonzero = 0;
    double total = 0;
    int64_t idx = 0;
    int64_t i[3];
    for (i[0] = 0; i[0] < n[0]; ++i[0]) {
      for (i[1] = 0; i[1] < n[1]; ++i[1]) {
        for (i[2] = 0; i[2] < n[2]; ++i[2], ++idx) {
          const double v = cells[idx];
          if (!(v > 0) || !(v <= kMaxCell)) continue;  // empty, negative, NaN or infinite
          ++nonzero;
          hits += v > hit_threshold_gev;
          total += v;
          const int64_t l = i[d];
          sum[l] += v;
          for (int a = 0; a < 2; ++a) {
            const double c = static_cast<double>(i[t[a]]) + 0.5;  // cell centre in cell units
            m1[a][l] += v * c;
            m2[a][l] += v * c * c;
          }
        }
      }
    }
    double* row = &table.values[static_cast<size_t>(e * nf)];
    int64_t k = 0;
    for (int64_t l = 0; l < layers; ++l) row[k++] = sum[l];
    for (int pass = 0; pass < 2; ++pass) {  // centroids, then widths
      for (int a = 0; a < 2; ++a) {
        for (int64_t l = 0; l < layers; ++l) {
          double value = 0;
          if (sum[l] > 0) {
            const double mean = m1[a][l] / sum[l];
            value = pass == 0 ? mean : std::sqrt(std::max(0.0, m2[a][l] / sum[l] - mean * mean));
          }
          row[k++] = value;
        }
      }
    }
    const double energy = set.energy_gev[e];
    row[k++] = energy > 0 && std::isfinite(energy) ? total / energy : 0.0;
    row[k++] = static_cast<double>(hits);
    row[k++] = static_cast<double>(nonzero);
    row[k++] = static_cast<double>(std::max_element(sum.begin(), sum.end()) - sum.begin());
  }
  return table;
}

}  // namespace gantry::physics
