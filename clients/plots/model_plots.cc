#include "clients/plots/model_plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "clients/plots/curve_plot.h"

namespace gantry::plots {
namespace {

// A figure drawn once per energy bin from the histogram of that name. File names come from this
// table only.
struct Kind {
  const char* histogram;
  const char* file_stem;
  const char* title;
  const char* y_label;
  // Log y for profiles (energy falls by orders of magnitude from the core and the maximum to the
  // tails, where the GAN's mismodelling hides on a linear scale) and the cell spectrum; linear for
  // the per-shower distributions (one peak; empty tail bins would dominate a log scale).
  bool log_y;
};
constexpr Kind kKinds[] = {
    {"profile_z", "longitudinal_profile", "longitudinal profile", "mean energy per layer [GeV]",
     true},
    {"profile_x", "transverse_profile_x", "transverse profile (x)", "mean energy per slice [GeV]",
     true},
    {"profile_y", "transverse_profile_y", "transverse profile (y)", "mean energy per slice [GeV]",
     true},
    {"feature/total_energy", "energy_sum", "energy sum", "fraction of showers", false},
    {"feature/hits", "hit_count", "hit count", "fraction of showers", false},
    {"sampling_fraction", "sampling_fraction_distribution", "sampling fraction distribution",
     "fraction of showers", false},
    {"cell_energy", "cell_energy_spectrum", "cell energy spectrum", "fraction of cells", true},
};
constexpr int kKindCount = sizeof(kKinds) / sizeof(kKinds[0]);
constexpr char kSfCurve[] = "sampling_fraction_vs_energy";
constexpr char kSfPerBin[] = "sampling_fraction_per_bin";
constexpr size_t kMaxWarnings = 100;

// The metrics of the validation curve figure, in legend order (the model version's metric names;
// each may have its floor "<name>_null"). "eprof" (older versions) only when neither profile
// metric of its own is there.
constexpr const char* kCurveMetrics[] = {
    "mre_sampling_fraction",     "eprof_longitudinal",           "eprof_transverse", "pos", "fom",
    "shower_max_relative_error", "centroid_depth_relative_error"};
constexpr char kCurveFallbackEprof[] = "eprof";
constexpr char kCurveFile[] = "validation_curve";

// Printable ASCII, cut to `limit` characters (server text in messages).
std::string Printable(const std::string& text, size_t limit = 60) {
  std::string out;
  for (char c : text) {
    if (out.size() >= limit) return out + "...";
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : '?';
  }
  return out;
}

// Server text inside Markdown: only characters that cannot start markup or links.
std::string MarkdownText(const std::string& text) {
  std::string out;
  for (char c : Printable(text)) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       std::string(" .,:;=+-/@").find(c) != std::string::npos;
    out += plain ? c : '?';
  }
  return out;
}

// The lower and upper energy of a label "10-20 GeV" (as validation writes them), if it is one.
std::optional<std::pair<double, double>> ParseEnergyBin(const std::string& label) {
  double lo = 0, hi = 0;
  int consumed = 0;
  if (std::sscanf(label.c_str(), "%lf-%lf GeV%n", &lo, &hi, &consumed) != 2 ||
      consumed != static_cast<int>(label.size()) || !(lo < hi)) {
    return std::nullopt;
  }
  return std::make_pair(lo, hi);
}

// A point series in increasing x (entries with equal x keep their order); the errors follow when
// their lengths match.
void SortPointsByX(RatioPlot* p) {
  std::vector<size_t> order(p->x.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return p->x[a] < p->x[b];  // NaN compares false: such a series is refused by the check
  });
  for (std::vector<double>* v :
       {&p->x, &p->reference, &p->generated, &p->reference_error, &p->generated_error}) {
    if (v->size() != order.size()) continue;
    std::vector<double> sorted;
    for (size_t i : order) sorted.push_back((*v)[i]);
    *v = std::move(sorted);
  }
}

RatioPlot FromHistogram(const v1::Histogram& h) {
  RatioPlot p;
  p.x_label = h.x_label();
  p.edges.assign(h.edges().begin(), h.edges().end());
  p.x.assign(h.x().begin(), h.x().end());
  p.reference.assign(h.reference().begin(), h.reference().end());
  p.generated.assign(h.generated().begin(), h.generated().end());
  p.reference_error.assign(h.reference_error().begin(), h.reference_error().end());
  p.generated_error.assign(h.generated_error().begin(), h.generated_error().end());
  if (p.edges.empty() && !p.x.empty() && !std::is_sorted(p.x.begin(), p.x.end()) &&
      p.x.size() == p.reference.size() && p.x.size() == p.generated.size()) {
    SortPointsByX(&p);
  }
  if (p.edges.empty() && p.x.empty()) {
    // Neither edges nor x: the bins are plain indices (the Histogram contract).
    for (size_t i = 0; i <= p.reference.size(); ++i) p.edges.push_back(static_cast<double>(i));
    if (p.x_label.empty()) p.x_label = "bin";
  }
  return p;
}

// Whether a histogram's lengths are small enough to copy (they are checked fully afterwards).
bool SizesBounded(const v1::Histogram& h) {
  const size_t limit = kMaxPlotBins + 1;
  return static_cast<size_t>(h.edges_size()) <= limit && static_cast<size_t>(h.x_size()) <= limit &&
         static_cast<size_t>(h.reference_size()) <= limit &&
         static_cast<size_t>(h.generated_size()) <= limit &&
         static_cast<size_t>(h.reference_error_size()) <= limit &&
         static_cast<size_t>(h.generated_error_size()) <= limit;
}

// The energy bins in plotting order: by energy when every label parses, else as first seen.
std::vector<std::string> OrderEnergyBins(std::vector<std::string> labels) {
  const bool all_parse = std::all_of(labels.begin(), labels.end(), [](const std::string& l) {
    return ParseEnergyBin(l).has_value();
  });
  if (all_parse) {
    std::stable_sort(labels.begin(), labels.end(), [](const std::string& a, const std::string& b) {
      return ParseEnergyBin(a)->first < ParseEnergyBin(b)->first;
    });
  }
  return labels;
}

class Builder {
 public:
  Builder(const v1::ModelVersion& model, const ModelPlotsOptions& options, const PlotSink& sink,
          ModelPlotsReport* report)
      : model_(model), options_(options), sink_(sink), report_(report) {
    ref_ = Printable(absl::StrCat(model.name(), ":", model.version()));
  }

  absl::Status Run() {
    Classify();
    RETURN_IF_ERROR(ValidationCurve());
    RETURN_IF_ERROR(SamplingFractionCurve());
    for (size_t b = 0; b < bins_.size(); ++b) {
      for (int k = 0; k < kKindCount; ++k) {
        auto it = per_bin_.find({k, static_cast<int>(b)});
        if (it == per_bin_.end()) continue;
        const Kind& kind = kKinds[k];
        RatioPlot plot = std::move(it->second.plot);
        plot.title = absl::StrCat(ref_, "  ", kind.title);
        plot.subtitle =
            bins_[b].empty() ? "all energies" : absl::StrCat("energy bin ", Printable(bins_[b]));
        plot.y_label = kind.y_label;
        plot.log_y = kind.log_y;
        if (plot.x_label.empty()) plot.x_label = kind.histogram;
        const std::string suffix =
            bins_[b].empty() ? "_all" : absl::StrFormat("_bin%02d", static_cast<int>(b) + 1);
        RETURN_IF_ERROR(Emit(plot, absl::StrCat(kind.file_stem, suffix), kind.title,
                             Printable(bins_[b]), it->second.index));
      }
    }
    FinishWarnings();
    if (report_->files.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          ref_, " has no validation histograms that can be plotted (", model_.histograms_size(),
          " stored",
          report_->warnings.empty() ? "" : absl::StrCat(", ", report_->warnings.size(), " skipped"),
          ")"));
    }
    const std::string index = Index();
    if (absl::Status s = sink_("index.md", index); !s.ok()) return s;
    report_->files.push_back({"index.md", "index", ""});
    return absl::OkStatus();
  }

 private:
  struct Candidate {
    int index = -1;
    RatioPlot plot;
  };

  // At most kMaxWarnings lines; the rest are counted in one last line.
  void Warn(std::string warning) {
    if (report_->warnings.size() < kMaxWarnings) {
      report_->warnings.push_back(std::move(warning));
    } else {
      ++unlisted_warnings_;
    }
  }

  void FinishWarnings() {
    if (unlisted_warnings_ > 0) {
      report_->warnings.push_back(absl::StrCat(unlisted_warnings_, " more warnings not listed"));
      unlisted_warnings_ = 0;
    }
  }

  void Skip(int index, const v1::Histogram& h, const std::string& why) {
    Warn(absl::StrCat(
        "histogram #", index, " \"", Printable(h.name()), "\"",
        h.energy_bin().empty() ? "" : absl::StrCat(" [", Printable(h.energy_bin()), "]"), ": ", why,
        "; skipped"));
  }

  // Checks a histogram and makes it a candidate plot, or warns.
  std::optional<Candidate> Check(int index, const v1::Histogram& h) {
    if (!SizesBounded(h)) {
      Skip(index, h, absl::StrCat("more than ", kMaxPlotBins, " entries"));
      return std::nullopt;
    }
    Candidate c{index, FromHistogram(h)};
    if (absl::Status s = CheckRatioPlot(c.plot); !s.ok()) {
      Skip(index, h, std::string(s.message()));
      return std::nullopt;
    }
    return c;
  }

  void Classify() {
    const int count = std::min(model_.histograms_size(), options_.max_histograms);
    if (count < model_.histograms_size()) {
      Warn(absl::StrCat("only the first ", count, " of ", model_.histograms_size(),
                        " histograms were looked at"));
    }
    // Energy bins of the per-bin kinds, in order of first appearance, then ordered.
    std::vector<std::string> seen;
    std::set<std::string> known;
    for (int i = 0; i < count; ++i) {
      const v1::Histogram& h = model_.histograms(i);
      if (KindOf(h.name()) < 0) continue;
      if (known.insert(h.energy_bin()).second) seen.push_back(h.energy_bin());
    }
    labels_in_order_ = seen;
    bins_ = OrderEnergyBins(seen);
    if (static_cast<int>(bins_.size()) > options_.max_energy_bins) {
      for (size_t b = options_.max_energy_bins; b < bins_.size(); ++b) {
        Warn(absl::StrCat("energy bin \"", Printable(bins_[b]), "\": more than ",
                          options_.max_energy_bins, " energy bins; skipped"));
      }
      bins_.resize(options_.max_energy_bins);
    }
    for (int i = 0; i < count; ++i) {
      const v1::Histogram& h = model_.histograms(i);
      if (h.name() == kSfCurve || h.name() == kSfPerBin) {
        if (h.name() == kSfCurve ? curve_.has_value() : per_bin_curve_.has_value()) {
          Skip(i, h, "a second histogram of this name");
          continue;
        }
        std::optional<Candidate> c = Check(i, h);
        if (h.name() == kSfCurve) {
          curve_ = std::move(c);
        } else {
          per_bin_curve_ = std::move(c);
        }
        continue;
      }
      const int k = KindOf(h.name());
      if (k < 0) continue;
      auto bin = std::find(bins_.begin(), bins_.end(), h.energy_bin());
      if (bin == bins_.end()) continue;  // warned once per bin above
      const std::pair<int, int> key{k, static_cast<int>(bin - bins_.begin())};
      if (per_bin_.count(key) > 0) {
        Skip(i, h, "a second histogram of this name and energy bin");
        continue;
      }
      if (std::optional<Candidate> c = Check(i, h)) per_bin_.emplace(key, std::move(*c));
    }
  }

  static int KindOf(const std::string& name) {
    for (int k = 0; k < kKindCount; ++k) {
      if (name == kKinds[k].histogram) return k;
    }
    return -1;
  }

  // The validation curve: every metric of kCurveMetrics against the training step, with its
  // floor. Points without a metric, or with a value the log scale cannot show (NaN, infinite,
  // zero or negative), are left out of that series with one warning per metric; at most
  // kMaxCurvePoints points are read.
  absl::Status ValidationCurve() {
    const int stored = model_.validation_curve_size();
    if (stored == 0) return absl::OkStatus();
    const int count = std::min(stored, static_cast<int>(kMaxCurvePoints));
    if (count < stored) {
      Warn(absl::StrCat("validation curve: only the first ", count, " of ", stored,
                        " points were plotted"));
    }
    // The points by step (the server sends them so; equal steps keep their order).
    std::vector<const v1::ValidationPoint*> points;
    int negative_steps = 0;
    for (int i = 0; i < count; ++i) {
      const v1::ValidationPoint& point = model_.validation_curve(i);
      if (point.step() < 0) {
        ++negative_steps;
        continue;
      }
      points.push_back(&point);
    }
    if (negative_steps > 0) {
      Warn(absl::StrCat("validation curve: ", negative_steps,
                        " points with a negative step; skipped"));
    }
    std::stable_sort(points.begin(), points.end(),
                     [](const v1::ValidationPoint* a, const v1::ValidationPoint* b) {
                       return a->step() < b->step();
                     });
    std::vector<std::string> names(std::begin(kCurveMetrics), std::end(kCurveMetrics));
    const auto has_metric = [&](const std::string& name) {
      return std::any_of(points.begin(), points.end(), [&](const v1::ValidationPoint* p) {
        return p->metrics().count(name) > 0;
      });
    };
    if (!has_metric("eprof_longitudinal") && !has_metric("eprof_transverse")) {
      names.insert(names.begin() + 1, kCurveFallbackEprof);
    }
    CurvePlot plot;
    plot.title = absl::StrCat(ref_, "  validation curve");
    plot.x_label = "training step";
    plot.y_label = "relative error (lower is better)";
    plot.log_y = true;
    for (const std::string& name : names) {
      CurveSeries series;
      series.label = name;
      int unusable = 0;
      const auto take = [&](const v1::ValidationPoint& p, const std::string& key,
                            std::vector<double>* x, std::vector<double>* y) {
        auto it = p.metrics().find(key);
        if (it == p.metrics().end()) return;
        if (!std::isfinite(it->second) || !(it->second > 0)) {
          ++unusable;
          return;
        }
        x->push_back(static_cast<double>(p.step()));
        y->push_back(it->second);
      };
      for (const v1::ValidationPoint* p : points) {
        take(*p, name, &series.x, &series.y);
        take(*p, absl::StrCat(name, "_null"), &series.floor_x, &series.floor_y);
      }
      if (unusable > 0) {
        Warn(absl::StrCat("validation curve: ", unusable, " values of ", name,
                          " (or its floor) NaN, infinite, zero or negative; skipped"));
      }
      if (series.y.empty()) continue;
      if (plot.series.size() == kMaxCurveSeries) break;
      plot.series.push_back(std::move(series));
    }
    if (plot.series.empty()) return absl::OkStatus();
    int first_epoch = points.front()->epoch(), last_epoch = points.back()->epoch();
    plot.subtitle =
        absl::StrCat(points.size(), " validated checkpoints, steps ", points.front()->step(), "-",
                     points.back()->step(), ", epochs ", first_epoch, "-", last_epoch);
    absl::StatusOr<std::string> bytes = RenderCurvePlot(plot, options_.render);
    if (!bytes.ok()) {
      Warn(absl::StrCat("validation curve: ", bytes.status().message(), "; skipped"));
      return absl::OkStatus();
    }
    const std::string file = absl::StrCat(kCurveFile, ".", FileExtension(options_.render.format));
    if (absl::Status s = sink_(file, *bytes); !s.ok()) return s;
    report_->files.push_back({file, "validation metrics against training step", ""});
    has_curve_ = true;
    return absl::OkStatus();
  }

  // Sampling fraction against energy: the point series when stored, else the per-bin curve against
  // the bins' centre energies (or their index when the bins are not plain energy ranges).
  absl::Status SamplingFractionCurve() {
    std::optional<Candidate> chosen;
    if (curve_.has_value()) {
      chosen = std::move(curve_);
      if (chosen->plot.x_label.empty()) chosen->plot.x_label = "E_primary [GeV]";
    } else if (per_bin_curve_.has_value()) {
      chosen = std::move(per_bin_curve_);
      RatioPlot& p = chosen->plot;
      const size_t n = p.reference.size();
      std::vector<double> centres;
      for (const std::string& label : labels_in_order_) {
        auto range = ParseEnergyBin(label);
        if (!range) break;
        centres.push_back(0.5 * (range->first + range->second));
      }
      p.edges.clear();
      if (centres.size() == n && std::is_sorted(centres.begin(), centres.end()) &&
          std::adjacent_find(centres.begin(), centres.end()) == centres.end()) {
        p.x = centres;
        p.x_label = "E_primary [GeV] (bin centre)";
      } else {
        p.x.clear();
        for (size_t i = 0; i < n; ++i) p.x.push_back(static_cast<double>(i));
        p.x_label = "validation energy bin";
      }
    }
    if (!chosen.has_value()) return absl::OkStatus();
    RatioPlot& p = chosen->plot;
    p.title = absl::StrCat(ref_, "  sampling fraction");
    p.subtitle = "mean sum of cells / E_primary per energy bin";
    p.y_label = "sampling fraction";
    p.log_y = false;
    return Emit(p, "sampling_fraction_vs_energy", "sampling fraction against energy", "",
                chosen->index);
  }

  absl::Status Emit(const RatioPlot& plot, const std::string& stem, const std::string& kind,
                    const std::string& energy_bin, int index) {
    absl::StatusOr<std::string> bytes = RenderRatioPlot(plot, options_.render);
    if (!bytes.ok()) {
      Skip(index, model_.histograms(index), std::string(bytes.status().message()));
      return absl::OkStatus();
    }
    const std::string file = absl::StrCat(stem, ".", FileExtension(options_.render.format));
    if (absl::Status s = sink_(file, *bytes); !s.ok()) return s;
    report_->files.push_back({file, kind, energy_bin});
    return absl::OkStatus();
  }

  std::string Index() const {
    std::string md =
        absl::StrCat("# Validation plots of ", MarkdownText(ref_), "\n\n",
                     "Generated showers (GAN) over the held-out Monte Carlo (MC), drawn "
                     "from the validation histograms stored with the model version. "
                     "Each figure has a ratio panel GAN/MC with a band of +-5%.",
                     has_curve_ ? " The validation curve shows the metrics of every validated "
                                  "checkpoint against the training step, each with its "
                                  "statistical floor (dashed)."
                                : "",
                     "\n\n", "| file | plot | energy bin |\n|---|---|---|\n");
    for (const PlotFile& f : report_->files) {
      absl::StrAppend(&md, "| [", f.file_name, "](", f.file_name, ") | ", f.kind, " | ",
                      f.energy_bin.empty() ? "-" : MarkdownText(f.energy_bin), " |\n");
    }
    if (!report_->warnings.empty()) {
      absl::StrAppend(&md, "\nNot plotted:\n\n");
      for (const std::string& w : report_->warnings) {
        absl::StrAppend(&md, "- ", MarkdownText(w), "\n");
      }
    }
    return md;
  }

  const v1::ModelVersion& model_;
  const ModelPlotsOptions& options_;
  const PlotSink& sink_;
  ModelPlotsReport* report_;
  std::string ref_;
  std::vector<std::string> labels_in_order_;
  std::vector<std::string> bins_;
  std::map<std::pair<int, int>, Candidate> per_bin_;
  std::optional<Candidate> curve_, per_bin_curve_;
  bool has_curve_ = false;
  size_t unlisted_warnings_ = 0;
};

}  // namespace

std::string FileExtension(ImageFormat format) {
  return format == ImageFormat::kSvg ? "svg" : "png";
}

absl::Status WriteModelPlots(const v1::ModelVersion& model, const ModelPlotsOptions& options,
                             const PlotSink& sink, ModelPlotsReport* report) {
  *report = ModelPlotsReport();
  return Builder(model, options, sink, report).Run();
}

}  // namespace gantry::plots
