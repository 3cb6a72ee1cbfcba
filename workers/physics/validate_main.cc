// gantry-validate: compares a generated shower file with a reference Monte Carlo file (reference
// section D metrics) and prints the figure of merit, per-bin metrics and their statistical floors;
// --json writes the whole report, histograms included, for plotting. --summary prints instead the
// mean sampling fraction and shower-maximum depth (with spreads) of both files side by side, then
// the report-wide metrics (default bins) of their first events (up to 512 MiB of cells each).
//   gantry-validate reference.h5 generated.h5 [--energies=50,100,200] [--half-width=5]
//                   [--edges=10,100,500] [--theta=60,90,120] [--json=report.json]
//                   [--floor-reference=mc2.h5] [--classifier-seeds=3] [--field-metrics=false]
//   gantry-validate --summary reference.h5 generated.h5 [--json=summary.json]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "showers/hdf5_io.h"
#include "workers/physics/shower_summary.h"
#include "workers/physics/validate_flags.h"
#include "workers/physics/validation.h"

ABSL_FLAG(bool, summary, false,
          "print the mean sampling fraction and shower-maximum depth of both files side by side");
ABSL_FLAG(std::optional<std::string>, energies, std::nullopt, "energy bin centres, GeV,...");
ABSL_FLAG(std::optional<double>, half_width, std::nullopt,
          "half width of the energy bins around --energies (GeV; default 5)");
ABSL_FLAG(std::optional<std::string>, edges, std::nullopt, "energy bin edges, GeV,...");
ABSL_FLAG(std::optional<std::string>, theta, std::nullopt, "angle bin centres, deg,...");
ABSL_FLAG(std::string, json, "", "write the whole report (or the summary) as JSON to this file");
ABSL_FLAG(std::string, floor_reference, "",
          "a second, independent Monte Carlo file: the field metrics' floors compare it with the "
          "reference (default: the reference's two halves)");
ABSL_FLAG(bool, field_metrics, true,
          "compute the field-standard metrics (classifier AUCs, Frechet distance, separation "
          "power per high-level feature, ratios)");
ABSL_FLAG(std::optional<int>, classifier_seeds, std::nullopt,
          "seeds per classifier two-sample test (default 3)");

namespace {

constexpr char kUsage[] =
    "usage: %s reference.h5 generated.h5 [--energies=GeV,...] [--half-width=GeV] "
    "[--edges=GeV,...] [--theta=deg,...] [--json=out.json]\n"
    "       [--floor-reference=mc2.h5] [--classifier-seeds=N] [--field-metrics=false]\n"
    "       %s --summary reference.h5 generated.h5 [--json=summary.json]\n";

std::string Json(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string JsonList(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + Json(v[i]);
  return s + "]";
}

std::string JsonMap(const std::map<std::string, double>& m) {
  std::string s = "{";
  bool first = true;
  for (const auto& [k, v] : m) {
    s += (first ? "\"" : ",\"") + k + "\":" + Json(v);
    first = false;
  }
  return s + "}";
}

void WriteJson(const std::string& path, const gantry::physics::ValidationReport& r) {
  std::ofstream out(path);
  out << "{\"metrics\":" << JsonMap(r.metrics) << ",\"bins\":[";
  for (size_t i = 0; i < r.bins.size(); ++i) {
    const auto& b = r.bins[i];
    out << (i ? "," : "") << "{\"energy_gev\":[" << Json(b.energy_lo_gev) << ","
        << Json(b.energy_hi_gev) << "],\"theta_rad\":[" << Json(b.theta_lo_rad) << ","
        << Json(b.theta_hi_rad) << "],\"reference_events\":" << b.reference_events
        << ",\"generated_events\":" << b.generated_events << ",\"metrics\":" << JsonMap(b.metrics)
        << "}";
  }
  out << "],\"histograms\":[";
  for (size_t i = 0; i < r.histograms.size(); ++i) {
    const auto& h = r.histograms[i];
    out << (i ? "," : "") << "{\"name\":\"" << h.name << "\",\"x_label\":\"" << h.x_label
        << "\",\"energy_bin\":" << h.energy_bin << ",\"edges\":" << JsonList(h.edges)
        << ",\"reference\":" << JsonList(h.reference) << ",\"generated\":" << JsonList(h.generated)
        << ",\"reference_error\":" << JsonList(h.reference_error)
        << ",\"generated_error\":" << JsonList(h.generated_error) << ",\"x\":" << JsonList(h.x)
        << "}";
  }
  out << "]}\n";
}

std::string JsonSpread(const gantry::physics::Spread& s) {
  return "{\"n\":" + std::to_string(s.n) + ",\"mean\":" + Json(s.mean) +
         ",\"stddev\":" + Json(s.stddev) + ",\"error\":" + Json(s.error) + "}";
}

std::string JsonSummary(const std::string& path, const gantry::physics::ShowerSummary& s) {
  return "{\"file\":\"" + path + "\",\"events\":" + std::to_string(s.events()) +
         ",\"empty_events\":" + std::to_string(s.empty_events()) + ",\"energy_gev\":[" +
         Json(s.energy_min_gev()) + "," + Json(s.energy_max_gev()) +
         "],\"sampling_fraction\":" + JsonSpread(s.sampling_fraction()) +
         ",\"shower_max_layer\":" + JsonSpread(s.shower_max_layer()) +
         ",\"centroid_layer\":" + JsonSpread(s.centroid_layer()) + "}";
}

// "mean +- stddev" with `digits` decimals.
std::string Cell(const gantry::physics::Spread& s, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f +- %.*f", digits, s.mean, digits, s.stddev);
  return buf;
}

// generated / reference of the means, with the statistical error of that ratio.
std::string Ratio(const gantry::physics::Spread& ref, const gantry::physics::Spread& gen) {
  if (!(std::fabs(ref.mean) > 0) || gen.n == 0) return "-";
  const double r = gen.mean / ref.mean;
  const double rel = std::hypot(ref.error / ref.mean, gen.mean != 0 ? gen.error / gen.mean : 0.0);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f +- %.3f", r, std::fabs(r) * rel);
  return buf;
}

// The field-standard metrics beside their floors (the same metric between two Monte Carlo
// samples).
void PrintFieldMetrics(const std::map<std::string, double>& m) {
  auto events = m.find("field_events");
  if (events == m.end()) return;
  if (events->second == 0) {
    std::printf("field metrics: not computed (too few events)\n");
    return;
  }
  std::printf("\nfield metrics (%.0f events per sample) %9s %12s\n", events->second, "value",
              "MC vs MC");
  auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  for (const auto& [key, value] : m) {
    const bool field = key == "auc_features" || key == "auc_cells" || key == "fpd" ||
                       key == "sep_mean" || key.rfind("sep_", 0) == 0 || ends_with(key, "_ratio");
    if (!field || ends_with(key, "_floor")) continue;
    const auto floor = m.find(key + "_floor");
    const auto spread = m.find(key + "_spread");
    char value_text[64];
    if (spread != m.end()) {
      std::snprintf(value_text, sizeof(value_text), "%.4f +- %.4f", value, spread->second);
    } else {
      std::snprintf(value_text, sizeof(value_text), "%.4f", value);
    }
    std::printf("%-30s %18s %12.4f\n", key.c_str(), value_text,
                floor != m.end() ? floor->second : std::nan(""));
  }
}

// The report-wide metrics with their statistical floors, and the invalid cells if any.
void PrintMetrics(const gantry::physics::ValidationReport& report) {
  std::printf("%-30s %10s %12s\n", "metric", "value", "floor(null)");
  for (const char* key : {"fom", "pos", "eprof", "eprof_longitudinal", "eprof_transverse", "ang",
                          "sf_mre", "sf_relative_error_max", "shower_max_relative_error",
                          "centroid_depth_relative_error", "separation_power"}) {
    auto it = report.metrics.find(key);
    if (it == report.metrics.end()) continue;
    auto null = report.metrics.find(std::string(key) + "_null");
    if (null == report.metrics.end()) {
      std::printf("%-30s %10.4f\n", key, it->second);
    } else {
      std::printf("%-30s %10.4f %12.4f\n", key, it->second, null->second);
    }
  }
  PrintFieldMetrics(report.metrics);
  for (const char* key : {"invalid_cells_reference", "invalid_cells_generated"}) {
    auto it = report.metrics.find(key);
    if (it != report.metrics.end() && it->second > 0) {
      std::printf("%-30s %10.0f (NaN, infinite or negative; read as 0)\n", key, it->second);
    }
  }
}

// At most this many bytes of cells per file go into the --summary metrics (the first events).
constexpr int64_t kSummaryMetricsBytes = int64_t{512} << 20;

// The first events of a file that fit in kSummaryMetricsBytes.
absl::StatusOr<gantry::showers::ShowerSet> ReadBounded(const std::string& path, int64_t events) {
  auto first = gantry::showers::ReadShowerEvents(path, 0, 1);
  if (!first.ok()) return first.status();
  const int64_t bytes = first->cells_per_event() * static_cast<int64_t>(sizeof(float));
  const int64_t count = std::max<int64_t>(1, std::min(events, kSummaryMetricsBytes / bytes));
  return gantry::showers::ReadShowerEvents(path, 0, count);
}

// --summary's metrics: ValidateShowers with the default bins on the first events of both files.
absl::StatusOr<gantry::physics::ValidationReport> SummaryMetrics(
    const std::vector<std::string>& files,
    const std::vector<gantry::physics::ShowerSummary>& summaries, int64_t* used_events) {
  std::vector<gantry::showers::ShowerSet> sets;
  for (size_t i = 0; i < files.size(); ++i) {
    auto set = ReadBounded(files[i], summaries[i].events());
    if (!set.ok()) return set.status();
    used_events[i] = set->events();
    sets.push_back(*std::move(set));
  }
  return gantry::physics::ValidateShowers(sets[0], sets[1], gantry::physics::ValidationOptions{});
}

// --summary: both files' headline figures side by side.
int Summary(const gantry::physics::ValidateCommand& command) {
  const std::vector<std::string> files = {command.reference, command.generated};
  const std::string& json = command.json;
  std::vector<gantry::physics::ShowerSummary> summaries;
  for (const std::string& file : files) {
    auto summary = gantry::physics::SummariseShowerFile(file);
    if (!summary.ok()) {
      std::fprintf(stderr, "%s\n", std::string(summary.status().message()).c_str());
      return 1;
    }
    summaries.push_back(*summary);
  }
  const auto& ref = summaries[0];
  const auto& gen = summaries[1];
  auto row = [](const char* name, const std::string& a, const std::string& b,
                const std::string& c) {
    std::printf("%-22s %-24s %-24s %s\n", name, a.c_str(), b.c_str(), c.c_str());
  };
  auto range = [](const gantry::physics::ShowerSummary& s) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.1f - %.1f", s.energy_min_gev(), s.energy_max_gev());
    return std::string(buf);
  };
  row("", "Monte Carlo (reference)", "generated", "generated / MC");
  row("events", std::to_string(ref.events()), std::to_string(gen.events()), "");
  row("energy [GeV]", range(ref), range(gen), "");
  row("sampling fraction", Cell(ref.sampling_fraction(), 5), Cell(gen.sampling_fraction(), 5),
      Ratio(ref.sampling_fraction(), gen.sampling_fraction()));
  row("shower max [layer]", Cell(ref.shower_max_layer(), 2), Cell(gen.shower_max_layer(), 2),
      Ratio(ref.shower_max_layer(), gen.shower_max_layer()));
  row("centroid [layer]", Cell(ref.centroid_layer(), 2), Cell(gen.centroid_layer(), 2),
      Ratio(ref.centroid_layer(), gen.centroid_layer()));
  if (ref.empty_events() + gen.empty_events() > 0) {
    row("empty showers", std::to_string(ref.empty_events()), std::to_string(gen.empty_events()),
        "");
  }
  if (ref.invalid_cells() + gen.invalid_cells() > 0) {
    row("invalid cells (as 0)", std::to_string(ref.invalid_cells()),
        std::to_string(gen.invalid_cells()), "");
  }
  std::printf("(mean +- standard deviation over showers; the ratio's error is statistical)\n");
  int64_t used[2] = {0, 0};
  const auto metrics = SummaryMetrics(files, summaries, used);
  if (metrics.ok()) {
    std::printf("\nmetrics (%lld and %lld events, %d energy bins over the reference's range):\n",
                static_cast<long long>(used[0]), static_cast<long long>(used[1]),
                static_cast<int>(metrics->bins.size()));
    PrintMetrics(*metrics);
  } else {
    std::printf("\nmetrics: not computed: %s\n", std::string(metrics.status().message()).c_str());
  }
  std::printf("reference: %s\ngenerated: %s\n", files[0].c_str(), files[1].c_str());
  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\"reference\":" << JsonSummary(files[0], ref)
        << ",\"generated\":" << JsonSummary(files[1], gen)
        << ",\"metrics\":" << (metrics.ok() ? JsonMap(metrics->metrics) : "null") << "}\n";
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", json.c_str());
      return 1;
    }
  }
  return 0;
}

// Metrics of the generated file against the reference, as a table (and JSON with --json).
int Validate(const gantry::physics::ValidateCommand& command) {
  const gantry::physics::ValidationOptions& options = command.options;
  const std::string& json = command.json;
  auto reference = gantry::showers::ReadShowerFile(command.reference);
  auto generated = gantry::showers::ReadShowerFile(command.generated);
  std::optional<absl::StatusOr<gantry::showers::ShowerSet>> second;
  if (!command.floor_reference.empty()) {
    second = gantry::showers::ReadShowerFile(command.floor_reference);
  }
  for (const auto* s : {&reference, &generated, second ? &*second : &reference}) {
    if (!s->ok()) {
      std::fprintf(stderr, "%s\n", std::string(s->status().message()).c_str());
      return 1;
    }
  }
  auto report = gantry::physics::ValidateShowers(*reference, *generated, options,
                                                 second ? &**second : nullptr);
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  PrintMetrics(*report);
  for (const auto& b : report->bins) {
    std::printf("bin %g-%g GeV", b.energy_lo_gev, b.energy_hi_gev);
    if (b.theta_hi_rad > 0) {
      std::printf(", %.1f-%.1f deg", b.theta_lo_rad * 180 / M_PI, b.theta_hi_rad * 180 / M_PI);
    }
    std::printf(" (%lld ref, %lld gen): fom %.4f pos %.4f eprof %.4f sf %.5f/%.5f (%.4f)\n",
                static_cast<long long>(b.reference_events),
                static_cast<long long>(b.generated_events), b.metrics.at("fom"),
                b.metrics.at("pos"), b.metrics.at("eprof"), b.metrics.at("sf_reference"),
                b.metrics.at("sf_generated"), b.metrics.at("sf_relative_error"));
  }
  for (const auto& s : report->skipped_bins) std::printf("skipped: %s\n", s.c_str());
  if (!json.empty()) {
    WriteJson(json, *report);
    std::printf("report written to %s\n", json.c_str());
  }
  return 0;
}

// The flags of gantry-validate, as a ValidateFlags (with the file arguments).
gantry::physics::ValidateFlags FlagValues(std::vector<std::string> files) {
  gantry::physics::ValidateFlags flags;
  flags.summary = absl::GetFlag(FLAGS_summary);
  flags.energies = absl::GetFlag(FLAGS_energies);
  flags.half_width = absl::GetFlag(FLAGS_half_width);
  flags.edges = absl::GetFlag(FLAGS_edges);
  flags.theta = absl::GetFlag(FLAGS_theta);
  flags.json = absl::GetFlag(FLAGS_json);
  flags.floor_reference = absl::GetFlag(FLAGS_floor_reference);
  flags.field_metrics = absl::GetFlag(FLAGS_field_metrics);
  flags.classifier_seeds = absl::GetFlag(FLAGS_classifier_seeds);
  flags.files = std::move(files);
  return flags;
}

}  // namespace

int main(int argc, char** argv) {
  bool help = false;
  const absl::StatusOr<std::vector<std::string>> files = gantry::ParseFlags(argc, argv, &help);
  if (help) {
    std::fprintf(stderr, kUsage, argv[0], argv[0]);
    return 0;
  }
  absl::StatusOr<gantry::physics::ValidateCommand> command =
      files.ok() ? gantry::physics::BuildValidateCommand(FlagValues(*files)) : files.status();
  if (!command.ok()) {
    std::fprintf(stderr, "%s\n", std::string(command.status().message()).c_str());
    std::fprintf(stderr, kUsage, argv[0], argv[0]);
    return 2;
  }
  // Log lines (LibTorch's among them) as every gantry program writes them; reports stay on stdout.
  absl::StatusOr<gantry::LogOptions> log_options = gantry::LogOptionsFromFlags("gantry-validate");
  if (!log_options.ok()) {
    std::fprintf(stderr, "%s\n", std::string(log_options.status().message()).c_str());
    return 2;
  }
  gantry::InitLogging(*log_options);
  return command->summary ? Summary(*command) : Validate(*command);
}
