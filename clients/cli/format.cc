#include "clients/cli/format.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "clients/cli/table.h"

namespace gantry::cli {
namespace {

std::string Normalize(const std::string& text) {
  std::string lower = absl::AsciiStrToLower(text);
  absl::StrReplaceAll({{"_", "-"}}, &lower);
  return lower;
}

// Trims "10.000" to "10", "0.50" to "0.5".
std::string Number(double value) {
  std::string text = absl::StrFormat("%.4g", value);
  return text;
}

std::string Short(double value) { return absl::StrFormat("%.3g", value); }

}  // namespace

std::string JobStateName(v1::JobState state) {
  if (state == v1::JOB_STATE_UNSPECIFIED) return "-";
  absl::string_view name = v1::JobState_Name(state);
  if (name.empty()) return absl::StrCat("STATE_", static_cast<int>(state));
  absl::ConsumePrefix(&name, "JOB_STATE_");  // tables show RUNNING; --json the full name
  return std::string(name);
}

absl::StatusOr<v1::JobState> ParseJobState(const std::string& text) {
  v1::JobState state;
  std::string upper = absl::AsciiStrToUpper(text);
  if (!absl::StartsWith(upper, "JOB_STATE_")) upper = absl::StrCat("JOB_STATE_", upper);
  if (v1::JobState_Parse(upper, &state) && state != v1::JOB_STATE_UNSPECIFIED) {
    return state;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown job state '", text,
      "' (one of queued, placing, running, restarting, succeeded, failed, cancelling, cancelled)"));
}

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

std::string ParticleName(v1::Particle particle) {
  switch (particle) {
    case v1::PARTICLE_ELECTRON:
      return "electron";
    case v1::PARTICLE_PHOTON:
      return "photon";
    case v1::PARTICLE_PI0:
      return "pi0";
    case v1::PARTICLE_CHARGED_PION:
      return "charged-pion";
    default:
      return "-";
  }
}

absl::StatusOr<v1::Particle> ParseParticle(const std::string& text) {
  const std::string name = Normalize(text);
  if (name == "electron" || name == "ele" || name == "e") return v1::PARTICLE_ELECTRON;
  if (name == "photon" || name == "gamma") return v1::PARTICLE_PHOTON;
  if (name == "pi0") return v1::PARTICLE_PI0;
  if (name == "charged-pion" || name == "chpi" || name == "pion") return v1::PARTICLE_CHARGED_PION;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown particle '", text, "' (one of electron, photon, pi0, charged-pion)"));
}

std::string DeviceName(v1::DeviceKind device) {
  return device == v1::DEVICE_KIND_GPU ? "gpu" : "cpu";
}

absl::StatusOr<v1::DeviceKind> ParseDevice(const std::string& text) {
  const std::string name = Normalize(text);
  if (name == "cpu") return v1::DEVICE_KIND_CPU;
  if (name == "gpu" || name == "cuda") return v1::DEVICE_KIND_GPU;
  return absl::InvalidArgumentError(absl::StrCat("unknown device '", text, "' (cpu or gpu)"));
}

std::string VisibilityName(v1::Visibility visibility) {
  return visibility == v1::VISIBILITY_PUBLIC ? "public" : "private";
}

absl::StatusOr<v1::Visibility> ParseVisibility(const std::string& text) {
  const std::string name = Normalize(text);
  if (name == "private") return v1::VISIBILITY_PRIVATE;
  if (name == "public") return v1::VISIBILITY_PUBLIC;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown visibility '", text, "' (private or public)"));
}

std::string LayoutName(v1::DatasetLayout layout) {
  switch (layout) {
    case v1::DATASET_LAYOUT_3DGAN_FIXED_ANGLE:
      return "3dgan-fixed-angle";
    case v1::DATASET_LAYOUT_3DGAN_VARIABLE_ANGLE:
      return "3dgan-variable-angle";
    case v1::DATASET_LAYOUT_CALOCHALLENGE:
      return "calochallenge";
    default:
      return "-";
  }
}

std::string ModelStatusName(v1::ModelStatus status) {
  switch (status) {
    case v1::MODEL_STATUS_READY:
      return "ready";
    case v1::MODEL_STATUS_ARCHIVED:
      return "archived";
    default:
      return "-";
  }
}

absl::StatusOr<v1::Precision> ParsePrecision(const std::string& text) {
  const std::string name = Normalize(text);
  if (name == "fp32" || name == "float32") return v1::PRECISION_FP32;
  if (name == "bf16" || name == "bfloat16") return v1::PRECISION_BF16;
  return absl::InvalidArgumentError(absl::StrCat("unknown precision '", text, "' (fp32 or bf16)"));
}

absl::StatusOr<v1::TrainingPrecision> ParseTrainingPrecision(const std::string& text) {
  const std::string name = Normalize(text);
  if (name == "fp32" || name == "float32") return v1::TRAINING_PRECISION_FP32;
  if (name == "bf16" || name == "bf16-autocast") return v1::TRAINING_PRECISION_BF16_AUTOCAST;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown training precision '", text, "' (fp32 or bf16-autocast)"));
}

std::string TrainingPrecisionName(v1::TrainingPrecision precision) {
  return precision == v1::TRAINING_PRECISION_BF16_AUTOCAST ? "bf16-autocast" : "fp32";
}

std::string FormatBf16(const v1::Bf16Check& check) {
  switch (check.state()) {
    case v1::Bf16Check::STATE_AVAILABLE:
      return "available";
    case v1::Bf16Check::STATE_UNAVAILABLE:
      return absl::StrCat("unavailable: ", check.reason());
    case v1::Bf16Check::STATE_NOT_CHECKED:
      return absl::StrCat("not checked: ", check.reason());
    default:
      return "not checked: registered before the BF16 check";
  }
}

std::string FormatTimestamp(const google::protobuf::Timestamp& timestamp) {
  if (timestamp.seconds() == 0 && timestamp.nanos() == 0) return "-";
  absl::Time time = absl::FromUnixSeconds(timestamp.seconds());
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", time, absl::UTCTimeZone());
}

std::string FormatAge(const google::protobuf::Timestamp& timestamp, absl::Time now) {
  if (timestamp.seconds() == 0 && timestamp.nanos() == 0) return "-";
  int64_t seconds = absl::ToInt64Seconds(now - absl::FromUnixSeconds(timestamp.seconds()));
  if (seconds < 0) seconds = 0;
  if (seconds < 120) return absl::StrCat(seconds, "s");
  if (seconds < 120 * 60) return absl::StrCat(seconds / 60, "m");
  if (seconds < 48 * 3600) return absl::StrCat(seconds / 3600, "h");
  return absl::StrCat(seconds / 86400, "d");
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  int64_t total = static_cast<int64_t>(std::llround(seconds));
  int64_t hours = total / 3600, minutes = (total % 3600) / 60, secs = total % 60;
  if (hours > 0) return absl::StrFormat("%dh%02dm", hours, minutes);
  if (minutes > 0) return absl::StrFormat("%dm%02ds", minutes, secs);
  return absl::StrFormat("%ds", secs);
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  // Two literal formats: absl checks a format string at compile time only when it is a constant.
  return value < 10 ? absl::StrFormat("%.2f %s", value, units[unit])
                    : absl::StrFormat("%.1f %s", value, units[unit]);
}

std::string FormatProgressCell(const v1::Progress& progress) {
  if (progress.epochs() <= 0) return "-";
  double fraction = static_cast<double>(progress.epoch()) / progress.epochs();
  if (progress.steps_per_epoch() > 0 && progress.epoch() < progress.epochs()) {
    double within = static_cast<double>(progress.step() % progress.steps_per_epoch()) /
                    progress.steps_per_epoch();
    fraction = (progress.epoch() + within) / progress.epochs();
  }
  fraction = std::clamp(fraction, 0.0, 1.0);
  return absl::StrFormat("%d/%d %d%%", progress.epoch(), progress.epochs(),
                         static_cast<int>(fraction * 100));
}

std::string FormatShape(const google::protobuf::RepeatedField<int64_t>& shape) {
  if (shape.empty()) return "-";
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

std::string FormatRange(const v1::Range& range) {
  if (range.min() == 0 && range.max() == 0) return "-";
  return absl::StrCat(Number(range.min()), "-", Number(range.max()));
}

std::string FormatLabels(const google::protobuf::Map<std::string, std::string>& labels) {
  std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

std::string FormatMetrics(const google::protobuf::Map<std::string, double>& metrics) {
  std::map<std::string, double> sorted(metrics.begin(), metrics.end());
  std::vector<std::string> parts;
  for (const auto& [name, value] : sorted) parts.push_back(absl::StrCat(name, "=", Short(value)));
  return absl::StrJoin(parts, " ");
}

namespace {

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string WithoutSuffix(const std::string& s, const std::string& tail) {
  return EndsWith(s, tail) ? s.substr(0, s.size() - tail.size()) : s;
}

}  // namespace

bool IsFieldMetric(const google::protobuf::Map<std::string, double>& metrics,
                   const std::string& key) {
  if (key == "field_events" || key == "field_cell_events" || key == "nonzero_cells_reference" ||
      key == "nonzero_cells_generated") {
    return true;
  }
  const std::string base = WithoutSuffix(WithoutSuffix(key, "_floor"), "_spread");
  return metrics.count(base + "_floor") > 0;
}

std::string FormatFieldMetrics(const google::protobuf::Map<std::string, double>& metrics) {
  std::map<std::string, double> sorted(metrics.begin(), metrics.end());
  Table table({"FIELD METRIC", "VALUE", "MC VS MC"});
  int rows = 0;
  for (const auto& [key, value] : sorted) {
    if (EndsWith(key, "_floor") || EndsWith(key, "_spread")) continue;
    const auto floor = sorted.find(key + "_floor");
    if (floor == sorted.end()) continue;
    const auto spread = sorted.find(key + "_spread");
    std::string shown = absl::StrFormat("%.4f", value);
    if (spread != sorted.end()) absl::StrAppend(&shown, absl::StrFormat(" +- %.4f", spread->second));
    std::string floor_shown = absl::StrFormat("%.4f", floor->second);
    if (const auto fs = sorted.find(key + "_spread_floor"); fs != sorted.end()) {
      absl::StrAppend(&floor_shown, absl::StrFormat(" +- %.4f", fs->second));
    }
    table.AddRow({key, shown, floor_shown});
    ++rows;
  }
  if (rows == 0) return "";
  std::ostringstream out;
  const auto events = sorted.find("field_events");
  out << "Field metrics (AUC 0.5 and ratios 1 are indistinguishable from the Monte Carlo; "
      << (events != sorted.end() ? absl::StrFormat("%.0f", events->second) : "?")
      << " events per sample):\n";
  table.Render(out);
  return out.str();
}

std::string FormatHistogram(const v1::Histogram& histogram) {
  std::string title = histogram.name();
  if (!histogram.energy_bin().empty()) absl::StrAppend(&title, " [", histogram.energy_bin(), "]");
  const int bins = std::max(histogram.reference_size(), histogram.generated_size());
  const bool edges = histogram.edges_size() == bins + 1;
  Table table({histogram.x_label().empty() ? "BIN" : histogram.x_label(), "REFERENCE", "GENERATED",
               "RATIO"});
  for (int i = 0; i < bins; ++i) {
    const bool has_ref = i < histogram.reference_size();
    const bool has_gen = i < histogram.generated_size();
    const double ref = has_ref ? histogram.reference(i) : 0;
    const double gen = has_gen ? histogram.generated(i) : 0;
    table.AddRow(
        {edges ? absl::StrCat(Number(histogram.edges(i)), "-", Number(histogram.edges(i + 1)))
               : absl::StrCat(i),
         has_ref ? absl::StrFormat("%.4g", ref) : "", has_gen ? absl::StrFormat("%.4g", gen) : "",
         has_ref && has_gen && ref != 0 ? absl::StrFormat("%.3f", gen / ref) : ""});
  }
  std::ostringstream out;
  out << title << '\n';
  table.Render(out);
  return out.str();
}

std::string FormatValidationCurve(
    const google::protobuf::RepeatedPtrField<v1::ValidationPoint>& curve) {
  if (curve.empty()) return "";
  std::vector<std::pair<std::string, std::string>> columns = {
      {"fom", "FOM"}, {"mre_sampling_fraction", "SF_MRE"}, {"eprof", "EPROF"}, {"pos", "POS"}};
  bool angles = false;
  for (const v1::ValidationPoint& point : curve) angles = angles || point.metrics().count("ang");
  if (angles) columns.push_back({"ang", "ANG"});
  columns.push_back({"separation_power", "SEP_POWER"});
  std::vector<std::string> headers = {"EPOCH", "STEP"};
  for (const auto& column : columns) headers.push_back(column.second);
  Table table(std::move(headers));
  for (const v1::ValidationPoint& point : curve) {
    std::vector<std::string> row = {absl::StrCat(point.epoch()), absl::StrCat(point.step())};
    for (const auto& column : columns) {
      auto it = point.metrics().find(column.first);
      row.push_back(it == point.metrics().end() ? "" : absl::StrFormat("%.4g", it->second));
    }
    table.AddRow(std::move(row));
  }
  std::ostringstream out;
  table.Render(out);
  return out.str();
}

std::string FormatJobEvent(const v1::JobEvent& event) {
  std::string time = "--:--:--";
  if (event.has_time()) {
    time = absl::FormatTime("%H:%M:%S", absl::FromUnixSeconds(event.time().seconds()),
                            absl::UTCTimeZone());
  }
  std::string body;
  switch (event.kind_case()) {
    case v1::JobEvent::kStateChange: {
      const auto& change = event.state_change();
      const std::string from =
          change.from() == v1::JOB_STATE_UNSPECIFIED ? "(new)" : JobStateName(change.from());
      body = absl::StrCat("state    ", from, " -> ", JobStateName(change.to()));
      if (!change.reason().empty() || !change.message().empty()) {
        absl::StrAppend(&body, " (", change.reason(),
                        change.reason().empty() || change.message().empty() ? "" : ": ",
                        change.message(), ")");
      }
      break;
    }
    case v1::JobEvent::kProgress: {
      const auto& progress = event.progress();
      body = absl::StrCat("progress epoch ", progress.epoch(), "/", progress.epochs(), " step ",
                          progress.step());
      if (!progress.losses().empty()) absl::StrAppend(&body, " ", FormatMetrics(progress.losses()));
      if (progress.samples_per_second() > 0) {
        absl::StrAppend(&body, absl::StrFormat(" %.1f samples/s", progress.samples_per_second()));
      }
      if (progress.eta_seconds() > 0) {
        absl::StrAppend(&body, " ETA ", FormatDuration(progress.eta_seconds()));
      }
      if (progress.data_stall_fraction() > 0) {
        absl::StrAppend(
            &body, absl::StrFormat(" data-stall %.0f%%", 100 * progress.data_stall_fraction()));
      }
      break;
    }
    case v1::JobEvent::kLog: {
      const auto& log = event.log();
      body = absl::StrCat("log      [rank ", log.rank(), "] ",
                          log.level().empty() ? "INFO" : log.level(), " ", log.text());
      break;
    }
    case v1::JobEvent::kCheckpointSaved: {
      const auto& checkpoint = event.checkpoint_saved();
      body = absl::StrCat("checkpoint epoch ", checkpoint.epoch(), " step ", checkpoint.step(), " ",
                          FormatBytes(checkpoint.size_bytes()), " sha256 ",
                          checkpoint.sha256().substr(0, 12));
      if (checkpoint.has_fom()) {
        absl::StrAppend(&body, absl::StrFormat(" fom=%.4g", checkpoint.fom()));
      }
      break;
    }
    case v1::JobEvent::kRestart: {
      const auto& restart = event.restart();
      body = absl::StrCat("restart  attempt ", restart.attempt(), " (", restart.reason(),
                          restart.counted() ? "" : ", not counted", "): ");
      if (restart.resumed_from_sha256().empty()) {
        absl::StrAppend(&body, "from scratch");
      } else {
        absl::StrAppend(&body, "from step ", restart.resumed_from_step(), " (checkpoint ",
                        restart.resumed_from_sha256().substr(0, 12), "), ", restart.redone_steps(),
                        " steps redone",
                        restart.redone_seconds() > 0
                            ? absl::StrCat(" (", FormatDuration(restart.redone_seconds()), ")")
                            : "");
      }
      if (restart.redone_device_hours() > 0) {
        absl::StrAppend(&body,
                        absl::StrFormat("; redone work %.4f device-h, %.4f USD",
                                        restart.redone_device_hours(), restart.redone_cost_usd()));
      }
      break;
    }
    case v1::JobEvent::kValidationPoint: {
      const auto& point = event.validation_point();
      body = absl::StrCat("validation epoch ", point.epoch(), " step ", point.step());
      google::protobuf::Map<std::string, double> shown;
      for (const char* key : {"fom", "mre_sampling_fraction", "eprof", "pos", "ang"}) {
        if (auto it = point.metrics().find(key); it != point.metrics().end()) {
          shown[key == std::string("mre_sampling_fraction") ? "sf_mre" : key] = it->second;
        }
      }
      if (!shown.empty()) absl::StrAppend(&body, " ", FormatMetrics(shown));
      break;
    }
    case v1::JobEvent::kModelRegistered: {
      const auto& model = event.model_registered();
      body = absl::StrCat("model    registered ", model.model_ref());
      if (!model.metrics().empty()) absl::StrAppend(&body, " ", FormatMetrics(model.metrics()));
      break;
    }
    default:
      body = "(unknown event)";
  }
  return absl::StrCat(time, "  #", event.sequence(), "  ", body);
}

}  // namespace gantry::cli
