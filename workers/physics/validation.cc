// Physics validation. Per-event quantities (profiles, moments, totals, hits, features) are computed
// once per sample; each (energy, angle) bin then averages the events that fall into it. Every
// difference metric gets a "_null" companion: the expected value of the same metric for two
// independent samples of one distribution with the bin's event counts, E|N(0, s)| = sqrt(2/pi) s
// with s^2 = var_r/n_r + var_g/n_g.
#include "workers/physics/validation.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "showers/toy_mc.h"

namespace gantry::physics {
namespace {

using showers::Layout;
using showers::ShowerSet;

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr int kSpectrumBins = 40;  // log10(E_cell / GeV) from -6 to 2
constexpr double kSpectrumLo = -6.0, kSpectrumHi = 2.0;

// Running mean and variance of one quantity over the events of a bin.
struct Moments {
  double n = 0, sum = 0, sum2 = 0;
  void Add(double v) {
    n += 1;
    sum += v;
    sum2 += v * v;
  }
  double Mean() const { return n > 0 ? sum / n : 0.0; }
  double Var() const { return n > 1 ? std::max(0.0, (sum2 - sum * sum / n) / (n - 1)) : 0.0; }
};

// |mean_r - mean_g| / |mean_r| and its null expectation; skipped (false) when mean_r is 0.
bool RelativeError(const Moments& r, const Moments& g, double* err, double* null) {
  const double ref = r.Mean();
  if (!(std::fabs(ref) > 0) || r.n == 0) return false;
  *err = std::fabs(ref - g.Mean()) / std::fabs(ref);
  const double se2 = r.Var() / std::max(r.n, 1.0) + (g.n > 0 ? g.Var() / g.n : 0.0);
  *null = kSqrt2OverPi * std::sqrt(se2) / std::fabs(ref);
  return true;
}

// Everything validation needs from one event.
struct EventSummary {
  double energy = 0, theta = 0, total = 0, sf = 0;
  bool has_energy = false;
  double mu1[3] = {0, 0, 0}, mu2[3] = {0, 0, 0};
  double hits = 0, sparsity = 0, max_layer = 0, measured_theta = 0;
  std::vector<float> profile[3];   // slice sums along each axis
  std::vector<uint16_t> spectrum;  // cell counts per log10 energy bin
};

struct SampleSummary {
  std::vector<EventSummary> events;
  int depth_axis = 2;
};

SampleSummary Summarise(const ShowerSet& s, const ValidationOptions& o) {
  SampleSummary out;
  out.depth_axis = s.layout == Layout::kCaloChallenge ? 0 : 2;
  const int64_t n[3] = {s.shape[0], s.shape[1], s.shape[2]};
  const bool variable = s.layout == Layout::kVariableAngle3DGan;
  out.events.resize(static_cast<size_t>(s.events()));
  std::vector<double> p[3];
  for (int a = 0; a < 3; ++a) p[a].resize(static_cast<size_t>(n[a]));
  for (int64_t e = 0; e < s.events(); ++e) {
    EventSummary& ev = out.events[e];
    ev.energy = s.energy_gev[e];
    ev.theta = s.theta_rad.empty() ? 0.0 : s.theta_rad[e];
    ev.spectrum.assign(kSpectrumBins, 0);
    for (int a = 0; a < 3; ++a) std::fill(p[a].begin(), p[a].end(), 0.0);
    const float* cells = s.event(e);
    int64_t idx = 0, hits = 0, nonzero = 0;
    double total = 0;
    for (int64_t x = 0; x < n[0]; ++x) {
      for (int64_t y = 0; y < n[1]; ++y) {
        double row = 0;
        for (int64_t z = 0; z < n[2]; ++z, ++idx) {
          const double v = cells[idx];
          if (v <= 0) continue;
          row += v;
          p[2][z] += v;
          ++nonzero;
          if (v > o.hit_threshold_gev) ++hits;
          const int b = static_cast<int>((std::log10(v) - kSpectrumLo) /
                                         (kSpectrumHi - kSpectrumLo) * kSpectrumBins);
          ++ev.spectrum[std::clamp(b, 0, kSpectrumBins - 1)];
        }
        p[0][x] += row;
        p[1][y] += row;
        total += row;
      }
    }
    ev.total = total;
    ev.sf = ev.energy > 0 ? total / ev.energy : 0.0;
    ev.has_energy = total > 0;
    ev.hits = static_cast<double>(hits);
    ev.sparsity = static_cast<double>(nonzero) / static_cast<double>(s.cells_per_event());
    for (int a = 0; a < 3; ++a) {
      ev.profile[a].assign(p[a].begin(), p[a].end());
      if (!ev.has_energy) continue;
      double m1 = 0;
      for (int64_t i = 0; i < n[a]; ++i) m1 += static_cast<double>(i) * p[a][i];
      m1 /= total;
      double m2 = 0;
      for (int64_t i = 0; i < n[a]; ++i) m2 += (i - m1) * (i - m1) * p[a][i];
      ev.mu1[a] = m1;
      ev.mu2[a] = m2 / total;
    }
    const std::vector<double>& depth = p[out.depth_axis];
    ev.max_layer =
        static_cast<double>(std::max_element(depth.begin(), depth.end()) - depth.begin());
    ev.measured_theta = variable ? showers::MeasureThetaRad(cells, s.shape)
                                 : std::numeric_limits<double>::quiet_NaN();
  }
  return out;
}

struct Bin {
  double e_lo, e_hi, t_lo = 0, t_hi = 0;
  bool by_theta = false;
  bool Contains(const EventSummary& ev) const {
    if (ev.energy < e_lo || ev.energy > e_hi) return false;
    return !by_theta || (ev.theta >= t_lo && ev.theta <= t_hi);
  }
};

absl::StatusOr<std::vector<Bin>> MakeBins(const ShowerSet& reference, const ValidationOptions& o,
                                          bool angles) {
  std::vector<std::pair<double, double>> energy;
  if (!o.energy_edges_gev.empty()) {
    if (o.energy_edges_gev.size() < 2 ||
        !std::is_sorted(o.energy_edges_gev.begin(), o.energy_edges_gev.end())) {
      return absl::InvalidArgumentError("energy_edges_gev needs at least two increasing edges");
    }
    for (size_t i = 0; i + 1 < o.energy_edges_gev.size(); ++i) {
      // Half-open bins except the last; the upper edge is nudged down so neighbours never share
      // events.
      const double hi = i + 2 == o.energy_edges_gev.size()
                            ? o.energy_edges_gev[i + 1]
                            : std::nextafter(o.energy_edges_gev[i + 1], -1.0);
      energy.emplace_back(o.energy_edges_gev[i], hi);
    }
  } else if (!o.energy_centres_gev.empty()) {
    if (!(o.energy_half_width_gev > 0)) {
      return absl::InvalidArgumentError("energy_half_width_gev must be positive");
    }
    for (double c : o.energy_centres_gev) {
      energy.emplace_back(c - o.energy_half_width_gev, c + o.energy_half_width_gev);
    }
  } else {
    if (o.default_energy_bins < 1)
      return absl::InvalidArgumentError("default_energy_bins must be >= 1");
    const auto [lo, hi] =
        std::minmax_element(reference.energy_gev.begin(), reference.energy_gev.end());
    const int nb = o.default_energy_bins;
    for (int i = 0; i < nb; ++i) {
      const double a = *lo + (*hi - *lo) * i / nb, b = *lo + (*hi - *lo) * (i + 1) / nb;
      energy.emplace_back(a, i + 1 == nb ? b : std::nextafter(b, -1.0));
    }
  }
  std::vector<Bin> bins;
  for (auto [lo, hi] : energy) {
    if (angles && !o.theta_centres_rad.empty()) {
      for (double t : o.theta_centres_rad) {
        bins.push_back(Bin{lo, hi, t - o.theta_half_width_rad, t + o.theta_half_width_rad, true});
      }
    } else {
      bins.push_back(Bin{lo, hi});
    }
  }
  return bins;
}

// Equal-width edges over the reference values, padded by 5% of the range on both sides; values
// outside fall into the end bins, so a generated sample far off still separates.
std::vector<double> FeatureEdges(const std::vector<double>& ref, int bins) {
  double lo = *std::min_element(ref.begin(), ref.end());
  double hi = *std::max_element(ref.begin(), ref.end());
  double pad = 0.05 * (hi - lo);
  if (!(pad > 0)) pad = std::max(1e-9, 0.05 * std::fabs(lo));
  lo -= pad;
  hi += pad;
  std::vector<double> edges(bins + 1);
  for (int i = 0; i <= bins; ++i) edges[i] = lo + (hi - lo) * i / bins;
  return edges;
}

std::vector<double> Fill(const std::vector<double>& values, const std::vector<double>& edges) {
  const int bins = static_cast<int>(edges.size()) - 1;
  std::vector<double> h(bins, 0.0);
  for (double v : values) {
    const int b = static_cast<int>((v - edges[0]) / (edges[bins] - edges[0]) * bins);
    h[std::clamp(b, 0, bins - 1)] += 1.0;
  }
  const double total = std::accumulate(h.begin(), h.end(), 0.0);
  if (total > 0) {
    for (double& x : h) x /= total;
  }
  return h;
}

// One high-level feature of an event, by name.
struct Feature {
  std::string name, label;
  std::function<double(const EventSummary&)> value;
};

std::vector<Feature> Features(const SampleSummary& s, const std::array<std::string, 3>& axes,
                              int64_t depth_layers) {
  std::vector<Feature> f;
  f.push_back(
      {"total_energy", "sum of cells [GeV]", [](const EventSummary& e) { return e.total; }});
  f.push_back({"sampling_fraction", "sum of cells / E_primary",
               [](const EventSummary& e) { return e.sf; }});
  f.push_back({"hits", "cells above threshold", [](const EventSummary& e) { return e.hits; }});
  f.push_back(
      {"max_layer", "layer of the maximum", [](const EventSummary& e) { return e.max_layer; }});
  for (int a = 0; a < 3; ++a) {
    f.push_back({absl::StrCat("centroid_", axes[a]),
                 absl::StrCat("mu1 along ", axes[a], " [cells]"),
                 [a](const EventSummary& e) { return e.mu1[a]; }});
    f.push_back({absl::StrCat("width_", axes[a]),
                 absl::StrCat("sqrt(mu2) along ", axes[a], " [cells]"),
                 [a](const EventSummary& e) { return std::sqrt(e.mu2[a]); }});
  }
  const int d = s.depth_axis;
  for (int64_t l = 0; l < depth_layers; ++l) {
    f.push_back({absl::StrFormat("layer_energy_%02d", l),
                 absl::StrCat("energy in layer ", l, " [GeV]"),
                 [d, l](const EventSummary& e) { return static_cast<double>(e.profile[d][l]); }});
  }
  return f;
}

// The input checks: matching layouts and shapes, non-empty consistent samples, sane options.
absl::Status CheckInputs(const ShowerSet& reference, const ShowerSet& generated,
                         const ValidationOptions& options) {
  if (reference.layout != generated.layout) {
    return absl::InvalidArgumentError("reference and generated showers have different layouts");
  }
  if (reference.shape != generated.shape) {
    return absl::InvalidArgumentError(
        absl::StrFormat("reference shape (%d,%d,%d) differs from generated (%d,%d,%d)",
                        reference.shape[0], reference.shape[1], reference.shape[2],
                        generated.shape[0], generated.shape[1], generated.shape[2]));
  }
  for (const ShowerSet* s : {&reference, &generated}) {
    const char* which = s == &reference ? "reference" : "generated";
    if (s->events() == 0)
      return absl::InvalidArgumentError(absl::StrCat(which, " sample is empty"));
    if (static_cast<int64_t>(s->cells.size()) != s->events() * s->cells_per_event()) {
      return absl::InvalidArgumentError(absl::StrCat(which,
                                                     " sample has a cell count that does not "
                                                     "match its events and shape"));
    }
  }
  if (options.feature_bins < 2 || options.min_events_per_bin < 1) {
    return absl::InvalidArgumentError("feature_bins must be >= 2 and min_events_per_bin >= 1");
  }
  return absl::OkStatus();
}

// Angle metrics need variable-angle samples that carry theta for every event.
bool HasPerEventAngles(const ShowerSet& reference, const ShowerSet& generated) {
  return reference.layout == Layout::kVariableAngle3DGan &&
         static_cast<int64_t>(reference.theta_rad.size()) == reference.events() &&
         static_cast<int64_t>(generated.theta_rad.size()) == generated.events();
}

using EventList = std::vector<const EventSummary*>;

EventList EventsIn(const Bin& bin, const SampleSummary& sample) {
  EventList out;
  for (const EventSummary& e : sample.events) {
    if (bin.Contains(e)) out.push_back(&e);
  }
  return out;
}

std::string BinLabel(const Bin& bin) {
  std::string label = absl::StrFormat("energy %g-%g GeV", bin.e_lo, bin.e_hi);
  if (bin.by_theta) absl::StrAppendFormat(&label, ", theta %.3f-%.3f rad", bin.t_lo, bin.t_hi);
  return label;
}

std::vector<double> Values(const EventList& events,
                           const std::function<double(const EventSummary&)>& f) {
  std::vector<double> v;
  v.reserve(events.size());
  for (auto* e : events) v.push_back(f(*e));
  return v;
}

// Mean relative angle error of the measured barycentre angle against the label.
double AngleError(const EventList& events) {
  Moments a;
  for (auto* e : events) {
    if (std::isfinite(e->measured_theta) && e->theta > 0) {
      a.Add(std::fabs(e->theta - e->measured_theta) / e->theta);
    } else {
      a.Add(1.0);  // an empty shower has no angle: count it as a 100% error
    }
  }
  return a.Mean();
}

// A used bin's edges and event counts, before any metric.
BinMetrics EmptyBinMetrics(const Bin& bin, size_t reference_events, size_t generated_events) {
  BinMetrics bm;
  bm.energy_lo_gev = bin.e_lo;
  bm.energy_hi_gev = bin.e_hi;
  if (bin.by_theta) {
    bm.theta_lo_rad = bin.t_lo;
    bm.theta_hi_rad = bin.t_hi;
  }
  bm.reference_events = static_cast<int64_t>(reference_events);
  bm.generated_events = static_cast<int64_t>(generated_events);
  return bm;
}

// What scoring one (energy, angle) bin reads and writes.
struct BinScore {
  const EventList& r;
  const EventList& g;
  const std::array<std::string, 3>& axes;
  int bin_index;
  std::map<std::string, double>& m;
  std::vector<Histogram>& histograms;
};

// Sampling fraction; appends the bin's means to the per-bin curves.
void ScoreSamplingFraction(BinScore& b, std::vector<double>* sf_ref_curve,
                           std::vector<double>* sf_gen_curve) {
  Moments sf_r, sf_g;
  for (auto* e : b.r) sf_r.Add(e->sf);
  for (auto* e : b.g) sf_g.Add(e->sf);
  b.m["sf_reference"] = sf_r.Mean();
  b.m["sf_generated"] = sf_g.Mean();
  double err = 0, null = 0;
  if (RelativeError(sf_r, sf_g, &err, &null)) {
    b.m["sf_relative_error"] = err;
    b.m["sf_relative_error_null"] = null;
  }
  sf_ref_curve->push_back(sf_r.Mean());
  sf_gen_curve->push_back(sf_g.Mean());
}

// Profiles: eprof per axis = mean over slices (with reference energy) of the relative error.
void ScoreProfiles(BinScore& b, const std::array<int64_t, 3>& shape) {
  double eprof = 0, eprof_null = 0;
  for (int a = 0; a < 3; ++a) {
    const int64_t len = shape[a];
    Histogram h;
    h.name = absl::StrCat("profile_", b.axes[a]);
    h.x_label = absl::StrCat(b.axes[a], " slice");
    h.energy_bin = b.bin_index;
    h.edges.resize(len + 1);
    std::iota(h.edges.begin(), h.edges.end(), 0.0);
    double sum_err = 0, sum_null = 0, err = 0, null = 0;
    int used = 0;
    for (int64_t i = 0; i < len; ++i) {
      Moments sr, sg;
      for (auto* e : b.r) sr.Add(e->profile[a][i]);
      for (auto* e : b.g) sg.Add(e->profile[a][i]);
      h.reference.push_back(sr.Mean());
      h.generated.push_back(sg.Mean());
      if (RelativeError(sr, sg, &err, &null)) {
        sum_err += err;
        sum_null += null;
        ++used;
      }
    }
    const double axis_err = used ? sum_err / used : 0.0, axis_null = used ? sum_null / used : 0.0;
    b.m[absl::StrCat("eprof_", b.axes[a])] = axis_err;
    b.m[absl::StrCat("eprof_", b.axes[a], "_null")] = axis_null;
    eprof += axis_err / 3;
    eprof_null += axis_null / 3;
    b.histograms.push_back(std::move(h));
  }
  b.m["eprof"] = eprof;
  b.m["eprof_null"] = eprof_null;
}

// Moments: pos = mean over axes and (mu1, mu2) of the relative error of the means.
void ScoreMoments(BinScore& b) {
  double pos = 0, pos_null = 0, err = 0, null = 0;
  int pos_used = 0;
  for (int a = 0; a < 3; ++a) {
    for (int k = 1; k <= 2; ++k) {
      Moments mr, mg;
      for (auto* e : b.r) {
        if (e->has_energy) mr.Add(k == 1 ? e->mu1[a] : e->mu2[a]);
      }
      for (auto* e : b.g) {
        if (e->has_energy) mg.Add(k == 1 ? e->mu1[a] : e->mu2[a]);
      }
      if (!RelativeError(mr, mg, &err, &null)) continue;
      const std::string key = absl::StrCat("pos_", b.axes[a], "_mu", k);
      b.m[key] = err;
      b.m[key + "_null"] = null;
      pos += err;
      pos_null += null;
      ++pos_used;
    }
  }
  b.m["pos"] = pos_used ? pos / pos_used : 0.0;
  b.m["pos_null"] = pos_used ? pos_null / pos_used : 0.0;
}

// Figure of merit pos + eprof, plus the angle error (variable angle) measured against the label.
void ScoreFigureOfMerit(BinScore& b, bool angles) {
  double fom = b.m["pos"] + b.m["eprof"];
  if (angles) {
    b.m["ang"] = AngleError(b.g);
    b.m["ang_reference"] = AngleError(b.r);
    fom += b.m["ang"];
  }
  b.m["fom"] = fom;
}

// A distribution kept as a histogram pair with edges over the reference values.
const Histogram& KeepDistribution(BinScore& b, const std::string& name, const std::string& x_label,
                                  const std::vector<double>& vr, const std::vector<double>& vg,
                                  int feature_bins) {
  Histogram h;
  h.name = name;
  h.x_label = x_label;
  h.energy_bin = b.bin_index;
  h.edges = FeatureEdges(vr, feature_bins);
  h.reference = Fill(vr, h.edges);
  h.generated = Fill(vg, h.edges);
  b.histograms.push_back(h);
  return b.histograms.back();
}

// The cell energy spectrum: separation power on the raw counts, kept normalised.
void ScoreCellEnergy(BinScore& b) {
  Histogram h;
  h.name = "cell_energy";
  h.x_label = "log10(E_cell / GeV)";
  h.energy_bin = b.bin_index;
  for (int i = 0; i <= kSpectrumBins; ++i) {
    h.edges.push_back(kSpectrumLo + (kSpectrumHi - kSpectrumLo) * i / kSpectrumBins);
  }
  h.reference.assign(kSpectrumBins, 0.0);
  h.generated.assign(kSpectrumBins, 0.0);
  for (auto* e : b.r) {
    for (int i = 0; i < kSpectrumBins; ++i) h.reference[i] += e->spectrum[i];
  }
  for (auto* e : b.g) {
    for (int i = 0; i < kSpectrumBins; ++i) h.generated[i] += e->spectrum[i];
  }
  b.m["separation_power/cell_energy"] = SeparationPower(h.reference, h.generated);
  for (auto* v : {&h.reference, &h.generated}) {
    const double t = std::accumulate(v->begin(), v->end(), 0.0);
    if (t > 0) {
      for (double& x : *v) x /= t;
    }
  }
  b.histograms.push_back(std::move(h));
}

// Separation power on the high-level features, each with its statistical floor.
void ScoreFeatures(BinScore& b, const std::vector<Feature>& features, int feature_bins) {
  double sp = 0, sp_null = 0;
  for (const Feature& f : features) {
    const Histogram& h = KeepDistribution(b, absl::StrCat("feature/", f.name), f.label,
                                          Values(b.r, f.value), Values(b.g, f.value), feature_bins);
    const double s = SeparationPower(h.reference, h.generated);
    int occupied = 0;
    for (size_t i = 0; i < h.reference.size(); ++i)
      occupied += (h.reference[i] + h.generated[i]) > 0;
    // Null: E[(h1-h2)^2/(h1+h2)] ~ (1/n_r + 1/n_g)/2 per occupied bin, times 1/2.
    const double s_null = 0.25 * occupied * (1.0 / b.r.size() + 1.0 / b.g.size());
    b.m["separation_power/" + f.name] = s;
    b.m["separation_power/" + f.name + "_null"] = s_null;
    sp += s / features.size();
    sp_null += s_null / features.size();
  }
  b.m["separation_power"] = sp;
  b.m["separation_power_null"] = sp_null;
}

// Distributions kept as histograms, and separation power on the high-level features.
void ScoreDistributions(BinScore& b, const std::vector<Feature>& features, int feature_bins) {
  KeepDistribution(b, "sampling_fraction", "sum of cells / E_primary",
                   Values(b.r, [](auto& e) { return e.sf; }),
                   Values(b.g, [](auto& e) { return e.sf; }), feature_bins);
  KeepDistribution(b, "sparsity", "fraction of non-zero cells",
                   Values(b.r, [](auto& e) { return e.sparsity; }),
                   Values(b.g, [](auto& e) { return e.sparsity; }), feature_bins);
  ScoreCellEnergy(b);
  ScoreFeatures(b, features, feature_bins);
}

// Adds the bin's summary metrics to the running sums that become the report-wide means.
void AddToSums(const std::map<std::string, double>& m, std::map<std::string, double>* sums) {
  for (const char* key :
       {"sf_relative_error", "sf_relative_error_null", "eprof", "eprof_null", "pos", "pos_null",
        "ang", "ang_reference", "fom", "separation_power", "separation_power_null"}) {
    auto it = m.find(key);
    if (it != m.end()) (*sums)[key] += it->second;
  }
}

// The report-wide means over the used bins and the sampling fraction curve across bins.
void SummariseAcrossBins(const std::map<std::string, double>& sums,
                         std::vector<double> sf_ref_curve, std::vector<double> sf_gen_curve,
                         ValidationReport* report) {
  const double nb = static_cast<double>(report->bins.size());
  for (const auto& [key, total] : sums) {
    const std::string out = key == "sf_relative_error"        ? "sf_mre"
                            : key == "sf_relative_error_null" ? "sf_mre_null"
                                                              : key;
    report->metrics[out] = total / nb;
  }
  report->metrics["bins_used"] = nb;
  Histogram sf_curve;
  sf_curve.name = "sampling_fraction_per_bin";
  sf_curve.x_label = "bin index (see bins)";
  sf_curve.edges.resize(report->bins.size() + 1);
  std::iota(sf_curve.edges.begin(), sf_curve.edges.end(), 0.0);
  sf_curve.reference = std::move(sf_ref_curve);
  sf_curve.generated = std::move(sf_gen_curve);
  report->histograms.push_back(std::move(sf_curve));
}

}  // namespace

double SeparationPower(const std::vector<double>& h1, const std::vector<double>& h2) {
  const double n1 = std::accumulate(h1.begin(), h1.end(), 0.0);
  const double n2 = std::accumulate(h2.begin(), h2.end(), 0.0);
  if (!(n1 > 0) || !(n2 > 0) || h1.size() != h2.size()) return 0.0;
  double s = 0;
  for (size_t i = 0; i < h1.size(); ++i) {
    const double a = h1[i] / n1, b = h2[i] / n2;
    if (a + b > 0) s += (a - b) * (a - b) / (a + b);
  }
  return 0.5 * s;
}

absl::StatusOr<ValidationReport> ValidateShowers(const ShowerSet& reference,
                                                 const ShowerSet& generated,
                                                 const ValidationOptions& options) {
  if (absl::Status s = CheckInputs(reference, generated, options); !s.ok()) return s;
  const bool angles = HasPerEventAngles(reference, generated);
  if (!options.theta_centres_rad.empty() && !angles) {
    return absl::InvalidArgumentError(
        "angle bins need variable-angle samples with theta per event");
  }
  auto bins_or = MakeBins(reference, options, angles);
  if (!bins_or.ok()) return bins_or.status();
  const std::vector<Bin>& bins = *bins_or;

  const SampleSummary ref = Summarise(reference, options);
  const SampleSummary gen = Summarise(generated, options);
  const std::array<std::string, 3> axes = reference.layout == Layout::kCaloChallenge
                                              ? std::array<std::string, 3>{"layer", "alpha", "r"}
                                              : std::array<std::string, 3>{"x", "y", "z"};
  const std::vector<Feature> features = Features(ref, axes, reference.shape[ref.depth_axis]);

  ValidationReport report;
  std::map<std::string, double> sums;
  std::vector<double> sf_ref_curve, sf_gen_curve;
  for (const Bin& bin : bins) {
    const EventList r = EventsIn(bin, ref), g = EventsIn(bin, gen);
    if (static_cast<int64_t>(r.size()) < options.min_events_per_bin ||
        static_cast<int64_t>(g.size()) < options.min_events_per_bin) {
      report.skipped_bins.push_back(absl::StrCat(BinLabel(bin), ": ", r.size(), " reference, ",
                                                 g.size(), " generated events"));
      continue;
    }
    BinMetrics bm = EmptyBinMetrics(bin, r.size(), g.size());
    BinScore score{r, g, axes, static_cast<int>(report.bins.size()), bm.metrics, report.histograms};
    ScoreSamplingFraction(score, &sf_ref_curve, &sf_gen_curve);
    ScoreProfiles(score, reference.shape);
    ScoreMoments(score);
    ScoreFigureOfMerit(score, angles);
    ScoreDistributions(score, features, options.feature_bins);
    AddToSums(bm.metrics, &sums);
    report.bins.push_back(std::move(bm));
  }
  if (report.bins.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no energy bin has at least ", options.min_events_per_bin,
                     " events in both samples; skipped: ",
                     report.skipped_bins.empty() ? "none" : report.skipped_bins[0]));
  }
  SummariseAcrossBins(sums, std::move(sf_ref_curve), std::move(sf_gen_curve), &report);
  return report;
}

}  // namespace gantry::physics
