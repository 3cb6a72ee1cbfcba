// gantry-validate: compares a generated shower file with a reference Monte Carlo file (reference
// section D metrics) and prints the figure of merit, per-bin metrics and their statistical floors;
// --json writes the whole report, histograms included, for plotting.
//   gantry-validate reference.h5 generated.h5 [--energies=50,100,200] [--half-width=5]
//                   [--edges=10,100,500] [--theta=60,90,120] [--json=report.json]
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "workers/data/hdf5_io.h"
#include "workers/physics/validation.h"

namespace {

bool ParseList(const std::string& text, double scale, std::vector<double>* out) {
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double v = 0;
    if (!absl::SimpleAtod(item, &v)) return false;
    out->push_back(v * scale);
  }
  return !out->empty();
}

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
        << "}";
  }
  out << "]}\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s reference.h5 generated.h5 [--energies=GeV,...] [--half-width=GeV] "
                 "[--edges=GeV,...] [--theta=deg,...] [--json=out.json]\n",
                 argv[0]);
    return 2;
  }
  gantry::physics::ValidationOptions options;
  std::string json;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    bool ok = true;
    if (absl::StartsWith(arg, "--energies=")) {
      ok = ParseList(arg.substr(11), 1.0, &options.energy_centres_gev);
    } else if (absl::StartsWith(arg, "--edges=")) {
      ok = ParseList(arg.substr(8), 1.0, &options.energy_edges_gev);
    } else if (absl::StartsWith(arg, "--half-width=")) {
      ok = absl::SimpleAtod(arg.substr(13), &options.energy_half_width_gev);
    } else if (absl::StartsWith(arg, "--theta=")) {
      ok = ParseList(arg.substr(8), M_PI / 180.0, &options.theta_centres_rad);
    } else if (absl::StartsWith(arg, "--json=")) {
      json = arg.substr(7);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "bad argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  auto reference = gantry::data::ReadShowerFile(argv[1]);
  auto generated = gantry::data::ReadShowerFile(argv[2]);
  for (const auto* s : {&reference, &generated}) {
    if (!s->ok()) {
      std::fprintf(stderr, "%s\n", std::string(s->status().message()).c_str());
      return 1;
    }
  }
  auto report = gantry::physics::ValidateShowers(*reference, *generated, options);
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  std::printf("%-22s %10s %12s\n", "metric", "value", "floor(null)");
  for (const char* key : {"fom", "pos", "eprof", "ang", "sf_mre", "separation_power"}) {
    auto it = report->metrics.find(key);
    if (it == report->metrics.end()) continue;
    auto null = report->metrics.find(std::string(key) + "_null");
    if (null == report->metrics.end()) {
      std::printf("%-22s %10.4f\n", key, it->second);
    } else {
      std::printf("%-22s %10.4f %12.4f\n", key, it->second, null->second);
    }
  }
  for (const auto& b : report->bins) {
    std::printf("bin %g-%g GeV", b.energy_lo_gev, b.energy_hi_gev);
    if (b.theta_hi_rad > 0) {
      std::printf(", %.1f-%.1f deg", b.theta_lo_rad * 180 / M_PI, b.theta_hi_rad * 180 / M_PI);
    }
    std::printf(" (%lld ref, %lld gen): fom %.4f pos %.4f eprof %.4f sf %.5f/%.5f\n",
                static_cast<long long>(b.reference_events),
                static_cast<long long>(b.generated_events), b.metrics.at("fom"),
                b.metrics.at("pos"), b.metrics.at("eprof"), b.metrics.at("sf_reference"),
                b.metrics.at("sf_generated"));
  }
  for (const auto& s : report->skipped_bins) std::printf("skipped: %s\n", s.c_str());
  if (!json.empty()) {
    WriteJson(json, *report);
    std::printf("report written to %s\n", json.c_str());
  }
  return 0;
}
