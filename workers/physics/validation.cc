// Physics validation. Per-event quantities (profiles, moments, totals, hits, features) are computed
// once per sample; each (energy, angle) bin then averages the events that fall into it. Cells that
// are NaN, infinite or negative are invalid input: counted, reported and read as 0. Every relative
// error is bounded: |a - b| / max(|a|, |b|) for means, sum_i |a_i - b_i| / sum_i max(a_i, b_i) for
// profiles, both in [0, 1] (0 for identical inputs, 1 when one side is empty). Every difference
// metric gets a "_null" companion: the expected value of the same metric for two independent
// samples of one distribution with the bin's event counts, E|N(0, s)| = sqrt(2/pi) s with s^2 =
// var_r/n_r + var_g/n_g, over the same denominator; a worst-bin metric's null is the expected
// maximum over the bins.
#include "workers/physics/validation.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "showers/toy_mc.h"
#include "workers/physics/binning.h"

namespace gantry::physics {
namespace {

using showers::Layout;
using showers::ShowerSet;

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kMaxCell = std::numeric_limits<float>::max();
constexpr int kSpectrumBins = 40;  // log10(E_cell / GeV) from -6 to 2
constexpr double kSpectrumLo = -6.0, kSpectrumHi = 2.0;
// Fewer events than this in a sample (or half the reference without a second one): no field
// metrics.
constexpr int64_t kFieldMinEvents = 10;

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
  double Error() const { return n > 0 ? std::sqrt(Var() / n) : 0.0; }
};

// The standard deviation of mean_r - mean_g. A sample with one event has no spread of its own: it
// borrows the other sample's variance (both 0 when both have one event).
double DifferenceSigma(const Moments& r, const Moments& g) {
  const double vr = r.n > 1 ? r.Var() : g.Var(), vg = g.n > 1 ? g.Var() : r.Var();
  double s2 = 0;
  if (r.n > 0) s2 += vr / r.n;
  if (g.n > 0) s2 += vg / g.n;
  return std::sqrt(s2);
}

// A bounded relative error and its null expectation.
struct RelativeError {
  double value = 0, null = 0;
};

// |mean_r - mean_g| / max(|mean_r|, |mean_g|), in [0, 1]: 0 when both means are 0 (or both samples
// are empty), 1 when exactly one sample has no entries. Equal to |mean_g / mean_r - 1| to first
// order. Null: sqrt(2/pi) DifferenceSigma over the same denominator, at most 1.
RelativeError BoundedRelativeError(const Moments& r, const Moments& g) {
  if (r.n == 0 || g.n == 0) return {r.n == g.n ? 0.0 : 1.0, 0.0};
  const double mr = r.Mean(), mg = g.Mean();
  const double denom = std::max(std::fabs(mr), std::fabs(mg));
  if (!(denom > 0)) return {};
  return {std::min(1.0, std::fabs(mr - mg) / denom),
          std::min(1.0, kSqrt2OverPi * DifferenceSigma(r, g) / denom)};
}

// E[max_b |Z_b| s_b] for independent standard normal Z_b: the null of a worst-bin metric whose
// per-bin nulls are sqrt(2/pi) s_b. Integrates P(max > t) = 1 - prod_b erf(t / (s_b sqrt 2)) over
// t (Simpson's rule, 400 intervals up to 9 max s_b, where the tail is below 1e-17).
double ExpectedMaxAbs(const std::vector<double>& s) {
  const double top = s.empty() ? 0.0 : *std::max_element(s.begin(), s.end());
  if (!(top > 0)) return 0.0;
  constexpr int kSteps = 400;
  const double hi = 9.0 * top, h = hi / kSteps;
  auto tail = [&](double t) {
    double p = 1.0;
    for (double sb : s) {
      if (sb > 0) p *= std::erf(t / (sb * std::sqrt(2.0)));
    }
    return 1.0 - p;
  };
  double sum = tail(0.0) + tail(hi);
  for (int i = 1; i < kSteps; ++i) sum += (i % 2 ? 4.0 : 2.0) * tail(i * h);
  return sum * h / 3.0;
}

// The inner edges of the cell-energy spectrum's bins in GeV, 10^(kSpectrumLo + i (hi - lo) / bins)
// for i = 1 .. bins - 1.
const std::array<double, kSpectrumBins - 1>& SpectrumEdges() {
  static const std::array<double, kSpectrumBins - 1> edges = [] {
    std::array<double, kSpectrumBins - 1> e{};
    for (int i = 1; i < kSpectrumBins; ++i) {
      e[i - 1] = std::pow(10.0, kSpectrumLo + (kSpectrumHi - kSpectrumLo) * i / kSpectrumBins);
    }
    return e;
  }();
  return edges;
}

// The spectrum bin of a positive finite deposit, exactly as floor((log10 v - lo) / width) clamped
// to the bins, without a log10 per cell: a first guess from the double's exponent and mantissa
// (log2 v ~ exponent + mantissa fraction, off by < 0.09, i.e. < 0.2 bins), corrected against the
// table of edges.
int SpectrumBin(double v) {
  const auto& e = SpectrumEdges();
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  const double log2 = static_cast<double>(static_cast<int>((bits >> 52) & 0x7ff) - 1023) +
                      static_cast<double>(bits & ((uint64_t{1} << 52) - 1)) / 4503599627370496.0;
  const double guess =
      (log2 * 0.30102999566398120 - kSpectrumLo) / (kSpectrumHi - kSpectrumLo) * kSpectrumBins;
  int b = static_cast<int>(std::clamp(guess, 0.0, kSpectrumBins - 1.0));
  while (b < kSpectrumBins - 1 && v >= e[b]) ++b;
  while (b > 0 && v < e[b - 1]) --b;
  return b;
}

// Everything validation needs from one event.
struct EventSummary {
  double energy = 0, theta = 0, total = 0, sf = 0;
  bool has_energy = false;
  double mu1[3] = {0, 0, 0}, mu2[3] = {0, 0, 0};
  double hits = 0, sparsity = 0, max_layer = 0, measured_theta = 0;
  std::vector<double> profile[3];  // slice sums along each axis
  std::vector<uint16_t> spectrum;  // cell counts per log10 energy bin
};

struct SampleSummary {
  std::vector<EventSummary> events;
  int depth_axis = 2;
  int64_t invalid_cells = 0;   // NaN, infinite or negative, read as 0
  int64_t invalid_events = 0;  // events with at least one invalid cell
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
    int64_t idx = 0, hits = 0, nonzero = 0, invalid = 0;
    double total = 0;
    for (int64_t x = 0; x < n[0]; ++x) {
      for (int64_t y = 0; y < n[1]; ++y) {
        double row = 0;
        for (int64_t z = 0; z < n[2]; ++z, ++idx) {
          const double v = cells[idx];
          if (v <= 0) {  // the common empty cell: one comparison, as without the checks
            invalid += v < 0;
            continue;
          }
          if (!(v <= kMaxCell)) {  // NaN or infinity
            ++invalid;
            continue;
          }
          row += v;
          p[2][z] += v;
          ++nonzero;
          if (v > o.hit_threshold_gev) ++hits;
          ++ev.spectrum[SpectrumBin(v)];
        }
        p[0][x] += row;
        p[1][y] += row;
        total += row;
      }
    }
    out.invalid_cells += invalid;
    out.invalid_events += invalid > 0;
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
                 [d, l](const EventSummary& e) { return e.profile[d][l]; }});
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
  for (const ShowerSet* s : {&reference, &generated}) {
    for (int64_t e = 0; e < s->events(); ++e) {
      if (!std::isfinite(s->energy_gev[e]) || s->energy_gev[e] < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            s == &reference ? "reference" : "generated", " sample: the primary energy of event ", e,
            " is not a finite non-negative number of GeV"));
      }
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

// Mean relative angle error of the measured barycentre angle against the label, each event's at
// most 1.
double AngleError(const EventList& events) {
  Moments a;
  for (auto* e : events) {
    if (std::isfinite(e->measured_theta) && e->theta > 0) {
      a.Add(std::min(1.0, std::fabs(e->theta - e->measured_theta) / e->theta));
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
  int depth_axis;
  int bin_index;
  std::map<std::string, double>& m;
  std::vector<Histogram>& histograms;
};

// Writes `key` and `key_null`.
void Put(BinScore& b, const std::string& key, const RelativeError& e) {
  b.m[key] = e.value;
  b.m[key + "_null"] = e.null;
}

// The mean sampling fraction of a bin in both samples, for the curves across bins.
struct SamplingFractionPoint {
  double energy_gev = 0;
  Moments reference, generated;
};

// Sampling fraction; returns the bin's means for the curves across bins.
SamplingFractionPoint ScoreSamplingFraction(BinScore& b, double energy_centre_gev) {
  SamplingFractionPoint p;
  p.energy_gev = energy_centre_gev;
  for (auto* e : b.r) p.reference.Add(e->sf);
  for (auto* e : b.g) p.generated.Add(e->sf);
  b.m["sf_reference"] = p.reference.Mean();
  b.m["sf_generated"] = p.generated.Mean();
  Put(b, "sf_relative_error", BoundedRelativeError(p.reference, p.generated));
  return p;
}

// Profile error sums of one axis: sum_i |R_i - G_i|, sum_i max(R_i, G_i) and the null numerator
// sum_i sqrt(2/pi) sigma_i.
struct ProfileSums {
  double diff = 0, norm = 0, null = 0;
  RelativeError Get() const {
    if (!(norm > 0)) return {};
    return {std::min(1.0, diff / norm), std::min(1.0, null / norm)};
  }
};

// Profiles: eprof_<axis> = sum_i |R_i - G_i| / sum_i max(R_i, G_i) over the slices of the mean
// profiles R (reference) and G (generated): energy weighted, so near-empty slices weigh little and
// never divide by ~0; in [0, 1]. eprof is the mean over the three axes, eprof_longitudinal the
// depth axis, eprof_transverse the pooled other two.
void ScoreProfiles(BinScore& b, const std::array<int64_t, 3>& shape) {
  double eprof = 0, eprof_null = 0;
  ProfileSums transverse;
  for (int a = 0; a < 3; ++a) {
    const int64_t len = shape[a];
    Histogram h;
    h.name = absl::StrCat("profile_", b.axes[a]);
    h.x_label = absl::StrCat(b.axes[a], " slice");
    h.energy_bin = b.bin_index;
    h.edges.resize(len + 1);
    std::iota(h.edges.begin(), h.edges.end(), 0.0);
    ProfileSums sums;
    for (int64_t i = 0; i < len; ++i) {
      Moments sr, sg;
      for (auto* e : b.r) sr.Add(e->profile[a][i]);
      for (auto* e : b.g) sg.Add(e->profile[a][i]);
      h.reference.push_back(sr.Mean());
      h.generated.push_back(sg.Mean());
      h.reference_error.push_back(sr.Error());
      h.generated_error.push_back(sg.Error());
      sums.diff += std::fabs(sr.Mean() - sg.Mean());
      sums.norm += std::max(sr.Mean(), sg.Mean());
      sums.null += kSqrt2OverPi * DifferenceSigma(sr, sg);
    }
    const RelativeError axis = sums.Get();
    Put(b, absl::StrCat("eprof_", b.axes[a]), axis);
    eprof += axis.value / 3;
    eprof_null += axis.null / 3;
    if (a == b.depth_axis) {
      Put(b, "eprof_longitudinal", axis);
    } else {
      transverse.diff += sums.diff;
      transverse.norm += sums.norm;
      transverse.null += sums.null;
    }
    b.histograms.push_back(std::move(h));
  }
  b.m["eprof"] = eprof;
  b.m["eprof_null"] = eprof_null;
  Put(b, "eprof_transverse", transverse.Get());
}

// Moments: pos = mean over axes and (mu1, mu2) of the relative error of the means (showers with
// energy only).
void ScoreMoments(BinScore& b) {
  double pos = 0, pos_null = 0;
  for (int a = 0; a < 3; ++a) {
    for (int k = 1; k <= 2; ++k) {
      Moments mr, mg;
      for (auto* e : b.r) {
        if (e->has_energy) mr.Add(k == 1 ? e->mu1[a] : e->mu2[a]);
      }
      for (auto* e : b.g) {
        if (e->has_energy) mg.Add(k == 1 ? e->mu1[a] : e->mu2[a]);
      }
      const RelativeError err = BoundedRelativeError(mr, mg);
      Put(b, absl::StrCat("pos_", b.axes[a], "_mu", k), err);
      pos += err.value / 6;
      pos_null += err.null / 6;
    }
  }
  b.m["pos"] = pos;
  b.m["pos_null"] = pos_null;
}

// Depth: relative errors of the mean depth of the shower maximum and of the mean depth centroid
// (showers with energy only).
void ScoreDepth(BinScore& b) {
  Moments max_r, max_g, mu1_r, mu1_g;
  for (auto* e : b.r) {
    if (!e->has_energy) continue;
    max_r.Add(e->max_layer);
    mu1_r.Add(e->mu1[b.depth_axis]);
  }
  for (auto* e : b.g) {
    if (!e->has_energy) continue;
    max_g.Add(e->max_layer);
    mu1_g.Add(e->mu1[b.depth_axis]);
  }
  Put(b, "shower_max_relative_error", BoundedRelativeError(max_r, max_g));
  Put(b, "centroid_depth_relative_error", BoundedRelativeError(mu1_r, mu1_g));
}

// Figure of merit pos + eprof, plus the angle error (variable angle) measured against the label.
// fom_null = pos_null + eprof_null (+ ang_reference): the expectation of a sum is the sum of the
// expectations, and the angle's floor is the measurement's own error on the reference.
void ScoreFigureOfMerit(BinScore& b, bool angles) {
  double fom = b.m["pos"] + b.m["eprof"];
  double fom_null = b.m["pos_null"] + b.m["eprof_null"];
  if (angles) {
    b.m["ang"] = AngleError(b.g);
    b.m["ang_reference"] = AngleError(b.r);
    fom += b.m["ang"];
    fom_null += b.m["ang_reference"];
  }
  b.m["fom"] = fom;
  b.m["fom_null"] = fom_null;
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
  h.reference = NormalisedHistogram(vr, h.edges);
  h.generated = NormalisedHistogram(vg, h.edges);
  // Poisson error of a normalised count: sqrt(count) / N = sqrt(fraction / N).
  for (const auto& [fractions, n, errors] :
       {std::tuple(&h.reference, vr.size(), &h.reference_error),
        std::tuple(&h.generated, vg.size(), &h.generated_error)}) {
    for (double f : *fractions) errors->push_back(n > 0 ? std::sqrt(f / n) : 0.0);
  }
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
    // At most 1, the largest separation power.
    const double s_null = std::min(1.0, 0.25 * occupied * (1.0 / b.r.size() + 1.0 / b.g.size()));
    b.m["separation_power/" + f.name] = s;
    b.m["separation_power/" + f.name + "_null"] = s_null;
    sp += s / features.size();
    sp_null += s_null / features.size();
  }
  b.m["separation_power"] = std::min(1.0, sp);  // a mean of values <= 1, up to rounding
  b.m["separation_power_null"] = std::min(1.0, sp_null);
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
       {"sf_relative_error", "sf_relative_error_null", "eprof", "eprof_null", "eprof_longitudinal",
        "eprof_longitudinal_null", "eprof_transverse", "eprof_transverse_null", "pos", "pos_null",
        "ang", "ang_reference", "fom", "fom_null", "separation_power", "separation_power_null"}) {
    auto it = m.find(key);
    if (it != m.end()) (*sums)[key] += it->second;
  }
}

// The worst bin of a per-bin relative error (as `out`) and the expected worst bin of independent
// samples (`out`_null: ExpectedMaxAbs of the per-bin sigmas, at most 1).
void PutWorstBin(const std::vector<BinMetrics>& bins, const std::string& key,
                 const std::string& out, std::map<std::string, double>* metrics) {
  double worst = 0;
  std::vector<double> sigmas;
  for (const BinMetrics& b : bins) {
    worst = std::max(worst, b.metrics.at(key));
    sigmas.push_back(b.metrics.at(key + "_null") / kSqrt2OverPi);
  }
  (*metrics)[out] = worst;
  (*metrics)[out + "_null"] = std::min(1.0, ExpectedMaxAbs(sigmas));
}

// The report-wide means and worst bins over the used bins, and the sampling fraction curves
// across bins.
void SummariseAcrossBins(const std::map<std::string, double>& sums,
                         const std::vector<SamplingFractionPoint>& sf_points,
                         ValidationReport* report) {
  const double nb = static_cast<double>(report->bins.size());
  for (const auto& [key, total] : sums) {
    const std::string out = key == "sf_relative_error"        ? "sf_mre"
                            : key == "sf_relative_error_null" ? "sf_mre_null"
                                                              : key;
    report->metrics[out] = total / nb;
  }
  report->metrics["bins_used"] = nb;
  PutWorstBin(report->bins, "sf_relative_error", "sf_relative_error_max", &report->metrics);
  PutWorstBin(report->bins, "shower_max_relative_error", "shower_max_relative_error",
              &report->metrics);
  PutWorstBin(report->bins, "centroid_depth_relative_error", "centroid_depth_relative_error",
              &report->metrics);
  Histogram per_bin;
  per_bin.name = "sampling_fraction_per_bin";
  per_bin.x_label = "bin index (see bins)";
  per_bin.edges.resize(report->bins.size() + 1);
  std::iota(per_bin.edges.begin(), per_bin.edges.end(), 0.0);
  Histogram vs_energy;
  vs_energy.name = "sampling_fraction_vs_energy";
  vs_energy.x_label = "E_primary [GeV]";
  for (const SamplingFractionPoint& p : sf_points) {
    per_bin.reference.push_back(p.reference.Mean());
    per_bin.generated.push_back(p.generated.Mean());
    vs_energy.x.push_back(p.energy_gev);
    vs_energy.reference.push_back(p.reference.Mean());
    vs_energy.generated.push_back(p.generated.Mean());
    vs_energy.reference_error.push_back(p.reference.Error());
    vs_energy.generated_error.push_back(p.generated.Error());
  }
  // First in the list: a consumer that keeps only a prefix (a size budget) keeps these.
  report->histograms.insert(report->histograms.begin(), std::move(vs_energy));
  report->histograms.insert(report->histograms.begin(), std::move(per_bin));
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
  return std::min(1.0, 0.5 * s);  // 1 for disjoint histograms, up to rounding
}

absl::StatusOr<ValidationReport> ValidateShowers(const ShowerSet& reference,
                                                 const ShowerSet& generated,
                                                 const ValidationOptions& options,
                                                 const ShowerSet* second_reference) {
  if (absl::Status s = CheckInputs(reference, generated, options); !s.ok()) return s;
  if (second_reference != nullptr) {
    if (absl::Status s = CheckInputs(reference, *second_reference, options); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("second reference: ", s.message()));
    }
  }
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
  std::vector<SamplingFractionPoint> sf_points;
  for (const Bin& bin : bins) {
    const EventList r = EventsIn(bin, ref), g = EventsIn(bin, gen);
    if (static_cast<int64_t>(r.size()) < options.min_events_per_bin ||
        static_cast<int64_t>(g.size()) < options.min_events_per_bin) {
      report.skipped_bins.push_back(absl::StrCat(BinLabel(bin), ": ", r.size(), " reference, ",
                                                 g.size(), " generated events"));
      continue;
    }
    BinMetrics bm = EmptyBinMetrics(bin, r.size(), g.size());
    BinScore score{r,
                   g,
                   axes,
                   ref.depth_axis,
                   static_cast<int>(report.bins.size()),
                   bm.metrics,
                   report.histograms};
    sf_points.push_back(ScoreSamplingFraction(score, 0.5 * (bin.e_lo + bin.e_hi)));
    ScoreProfiles(score, reference.shape);
    ScoreMoments(score);
    ScoreDepth(score);
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
  SummariseAcrossBins(sums, sf_points, &report);
  report.metrics["invalid_cells_reference"] = static_cast<double>(ref.invalid_cells);
  report.metrics["invalid_cells_generated"] = static_cast<double>(gen.invalid_cells);
  report.metrics["invalid_events_generated"] = static_cast<double>(gen.invalid_events);
  if (options.field_metrics) {
    const int64_t halves = second_reference != nullptr ? 1 : 2;
    if (std::min(reference.events() / halves, generated.events()) < kFieldMinEvents) {
      report.metrics["field_events"] = 0;
    } else {
      FieldMetricsOptions field = options.field;
      field.hit_threshold_gev = options.hit_threshold_gev;
      field.feature_bins = options.feature_bins;
      auto metrics = FieldMetrics(reference, generated, second_reference, field);
      if (!metrics.ok()) return metrics.status();
      report.metrics.insert(metrics->begin(), metrics->end());
    }
  }
  return report;
}

}  // namespace gantry::physics
