#include "workers/physics/field_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "workers/physics/binning.h"
#include "workers/physics/high_level_features.h"
#include "workers/physics/validation.h"

namespace gantry::physics {
namespace {

using showers::ShowerSet;

constexpr int64_t kMinEvents = 10;
// Feature values are clamped to +-1e15 on their way into the classifier and the Frechet distance:
// far beyond any shower's, and far from overflowing their squares (hostile cells can be 3e38 GeV).
constexpr double kMaxFeature = 1e15;

float Bounded(double v) {
  return std::isnan(v) ? 0.0f : static_cast<float>(std::clamp(v, -kMaxFeature, kMaxFeature));
}

// `n` of `available` event indices at an even stride (all of them when n == available).
std::vector<int64_t> Stride(const std::vector<int64_t>& available, int64_t n) {
  std::vector<int64_t> out;
  const auto size = static_cast<int64_t>(available.size());
  for (int64_t i = 0; i < n; ++i) out.push_back(available[i * size / n]);
  return out;
}

std::vector<int64_t> Every(int64_t events, int64_t first, int64_t step) {
  std::vector<int64_t> out;
  for (int64_t e = first; e < events; e += step) out.push_back(e);
  return out;
}

// The high-level features of the selected events, then log E_primary: the classifier's input.
Sample FeatureSample(const FeatureTable& t, const std::vector<int64_t>& events) {
  Sample s;
  s.events = static_cast<int64_t>(events.size());
  s.inputs = t.features() + 1;
  s.values.reserve(static_cast<size_t>(s.events * s.inputs));
  for (int64_t e : events) {
    for (int64_t f = 0; f < t.features(); ++f) s.values.push_back(Bounded(t.at(e, f)));
    s.values.push_back(Bounded(std::log(std::max(t.energy_gev[e], 1e-6))));
  }
  return s;
}

// The same features without the condition: what the Frechet distance compares.
Sample FeaturesOnly(const FeatureTable& t, const std::vector<int64_t>& events) {
  Sample s;
  s.events = static_cast<int64_t>(events.size());
  s.inputs = t.features();
  for (int64_t e : events) {
    for (int64_t f = 0; f < t.features(); ++f) s.values.push_back(Bounded(t.at(e, f)));
  }
  return s;
}

// log(1 + E_cell / threshold) per cell (invalid and empty cells 0), then log E_primary.
Sample CellSample(const ShowerSet& set, const std::vector<int64_t>& events, double threshold) {
  Sample s;
  s.events = static_cast<int64_t>(events.size());
  s.inputs = set.cells_per_event() + 1;
  s.values.reserve(static_cast<size_t>(s.events * s.inputs));
  for (int64_t e : events) {
    const float* cells = set.event(e);
    for (int64_t c = 0; c < set.cells_per_event(); ++c) {
      const double v = cells[c];
      s.values.push_back(v > 0 && std::isfinite(v) ? Bounded(std::log1p(v / threshold)) : 0.0f);
    }
    s.values.push_back(Bounded(std::log(std::max<double>(set.energy_gev[e], 1e-6))));
  }
  return s;
}

double StdDev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  double s = 0;
  for (double x : v) s += (x - mean) * (x - mean);
  return std::sqrt(s / (v.size() - 1));
}

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

double Ratio(double a, double b) { return b > 0 ? a / b : (a > 0 ? 1e9 : 1.0); }

// One comparison: `other` against `reference` (the generated sample, or the second reference
// for the floor). Adds its keys, with `suffix` ("" or "_floor").
struct Side {
  const FeatureTable& table;
  const ShowerSet& set;
  std::vector<int64_t> events;
};

absl::Status Score(const Side& ref, const Side& other, const FieldMetricsOptions& o,
                   int64_t cell_events, const std::string& suffix,
                   std::map<std::string, double>& out) {
  // Separation power per feature, with the reference's binning; averaged per group and overall.
  std::map<std::string, std::pair<double, int>> groups;
  double sep_sum = 0;
  for (int64_t f = 0; f < ref.table.features(); ++f) {
    std::vector<double> a, b;
    for (int64_t e : ref.events) a.push_back(ref.table.at(e, f));
    for (int64_t e : other.events) b.push_back(other.table.at(e, f));
    const std::vector<double> edges = FeatureEdges(a, o.feature_bins);
    const double sp = SeparationPower(NormalisedHistogram(a, edges), NormalisedHistogram(b, edges));
    sep_sum += sp;
    auto& g = groups[ref.table.groups[f]];
    g.first += sp;
    g.second += 1;
  }
  out["sep_mean" + suffix] = sep_sum / static_cast<double>(ref.table.features());
  for (const auto& [group, sum] : groups) {
    out[absl::StrCat("sep_", group, suffix)] = sum.first / sum.second;
  }

  auto column = [](const Side& s, const std::string& name) {
    const auto it = std::find(s.table.names.begin(), s.table.names.end(), name);
    const int64_t f = it - s.table.names.begin();
    std::vector<double> v;
    for (int64_t e : s.events) v.push_back(s.table.at(e, f));
    return v;
  };
  const double nonzero_ref = Mean(column(ref, "nonzero_cells"));
  const double nonzero_other = Mean(column(other, "nonzero_cells"));
  out["nonzero_cells_ratio" + suffix] = Ratio(nonzero_other, nonzero_ref);
  if (suffix.empty()) {
    out["nonzero_cells_reference"] = nonzero_ref;
    out["nonzero_cells_generated"] = nonzero_other;
  }
  for (const char* name : {"hits", "sampling_fraction", "shower_max"}) {
    out[absl::StrCat(name, "_spread_ratio", suffix)] =
        Ratio(StdDev(column(other, name)), StdDev(column(ref, name)));
  }

  auto fpd = FrechetDistanceAtInfinity(FeaturesOnly(ref.table, ref.events),
                                       FeaturesOnly(other.table, other.events),
                                       o.features_classifier.seed);
  if (!fpd.ok()) return fpd.status();
  out["fpd" + suffix] = *fpd;

  auto features = ClassifierTwoSampleTest(FeatureSample(ref.table, ref.events),
                                          FeatureSample(other.table, other.events),
                                          o.features_classifier);
  if (!features.ok()) return features.status();
  out["auc_features" + suffix] = features->auc;
  out["auc_features_spread" + suffix] = features->spread;

  if (o.cells_classifier) {
    auto cells = ClassifierTwoSampleTest(
        CellSample(ref.set, Stride(ref.events, cell_events), o.hit_threshold_gev),
        CellSample(other.set, Stride(other.events, cell_events), o.hit_threshold_gev),
        o.cells_classifier_options);
    if (!cells.ok()) return cells.status();
    out["auc_cells" + suffix] = cells->auc;
    out["auc_cells_spread" + suffix] = cells->spread;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::map<std::string, double>> FieldMetrics(const ShowerSet& reference,
                                                           const ShowerSet& generated,
                                                           const ShowerSet* second_reference,
                                                           const FieldMetricsOptions& options) {
  for (const ShowerSet* s : {&generated, second_reference}) {
    if (s == nullptr) continue;
    if (s->layout != reference.layout || s->shape != reference.shape) {
      return absl::InvalidArgumentError(
          "field metrics: the samples must have the reference's layout and shape");
    }
  }
  if (options.feature_bins < 2 || options.max_events < kMinEvents ||
      options.max_cell_values < 1) {
    return absl::InvalidArgumentError(
        "field metrics: feature_bins must be >= 2, max_events >= 10 and max_cell_values >= 1");
  }
  const FeatureTable ref_table = HighLevelFeatures(reference, options.hit_threshold_gev);
  const FeatureTable gen_table = HighLevelFeatures(generated, options.hit_threshold_gev);
  std::vector<int64_t> ref_events, second_events;
  FeatureTable second_table;
  if (second_reference != nullptr) {
    ref_events = Every(reference.events(), 0, 1);
    second_table = HighLevelFeatures(*second_reference, options.hit_threshold_gev);
    second_events = Every(second_reference->events(), 0, 1);
  } else {
    ref_events = Every(reference.events(), 0, 2);
    second_events = Every(reference.events(), 1, 2);
  }
  const int64_t n = std::min({static_cast<int64_t>(ref_events.size()),
                              static_cast<int64_t>(second_events.size()), generated.events(),
                              options.max_events});
  if (n < kMinEvents) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field metrics need at least ", kMinEvents, " events in each sample",
        second_reference == nullptr ? " (the reference is split in two halves)" : "", "; have ",
        n));
  }
  const int64_t cell_events = std::clamp<int64_t>(
      options.max_cell_values / std::max<int64_t>(1, reference.cells_per_event() + 1), kMinEvents,
      n);
  const Side ref{ref_table, reference, Stride(ref_events, n)};
  const Side gen{gen_table, generated, Stride(Every(generated.events(), 0, 1), n)};
  const Side second{second_reference != nullptr ? second_table : ref_table,
                    second_reference != nullptr ? *second_reference : reference,
                    Stride(second_events, n)};

  std::map<std::string, double> out;
  out["field_events"] = static_cast<double>(n);
  if (options.cells_classifier) out["field_cell_events"] = static_cast<double>(cell_events);
  if (absl::Status s = Score(ref, gen, options, cell_events, "", out); !s.ok()) return s;
  if (absl::Status s = Score(ref, second, options, cell_events, "_floor", out); !s.ok()) return s;
  return out;
}

}  // namespace gantry::physics
