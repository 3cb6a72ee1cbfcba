#include "workers/physics/validate_flags.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace gantry::physics {
namespace {

constexpr int kMaxClassifierSeeds = 20;

// A non-empty comma-separated list of numbers, each multiplied by `scale`.
absl::Status ParseList(const std::string& flag, const std::string& text, double scale,
                       std::vector<double>* out) {
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double v = 0;
    if (!absl::SimpleAtod(item, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad argument '--", flag, "=", text, "': \"", item, "\" is not a number"));
    }
    out->push_back(v * scale);
  }
  if (out->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("bad argument '--", flag, "=", text, "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckSummaryFlags(const ValidateFlags& f) {
  for (const auto& [flag, given] :
       {std::pair<const char*, bool>{"energies", f.energies.has_value()},
        {"half-width", f.half_width.has_value()},
        {"edges", f.edges.has_value()},
        {"theta", f.theta.has_value()},
        {"floor-reference", !f.floor_reference.empty()},
        {"classifier-seeds", f.classifier_seeds.has_value()},
        {"field-metrics", !f.field_metrics}}) {
    if (given) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad argument '--", flag, "' (with --summary only --json=FILE)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseBinning(const ValidateFlags& f, ValidationOptions* o) {
  if (f.energies) RETURN_IF_ERROR(ParseList("energies", *f.energies, 1.0, &o->energy_centres_gev));
  if (f.edges) RETURN_IF_ERROR(ParseList("edges", *f.edges, 1.0, &o->energy_edges_gev));
  if (f.half_width) o->energy_half_width_gev = *f.half_width;
  if (f.theta) RETURN_IF_ERROR(ParseList("theta", *f.theta, M_PI / 180.0, &o->theta_centres_rad));
  return absl::OkStatus();
}

absl::Status ParseFieldMetrics(const ValidateFlags& f, ValidationOptions* o) {
  o->field_metrics = f.field_metrics;
  if (f.classifier_seeds) {
    if (*f.classifier_seeds < 1 || *f.classifier_seeds > kMaxClassifierSeeds) {
      return absl::InvalidArgumentError(absl::StrCat("bad argument '--classifier-seeds=",
                                                     *f.classifier_seeds, "': give 1 to ",
                                                     kMaxClassifierSeeds));
    }
    o->field.features_classifier.seeds = *f.classifier_seeds;
    o->field.cells_classifier_options.seeds = *f.classifier_seeds;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ValidateCommand> BuildValidateCommand(const ValidateFlags& flags) {
  ValidateCommand command;
  command.summary = flags.summary;
  command.json = flags.json;
  if (flags.summary) {
    RETURN_IF_ERROR(CheckSummaryFlags(flags));
  } else {
    RETURN_IF_ERROR(ParseBinning(flags, &command.options));
    RETURN_IF_ERROR(ParseFieldMetrics(flags, &command.options));
    command.floor_reference = flags.floor_reference;
  }
  if (flags.files.size() != 2) {
    return absl::InvalidArgumentError("usage: give two files, reference.h5 generated.h5");
  }
  command.reference = flags.files[0];
  command.generated = flags.files[1];
  return command;
}

}  // namespace gantry::physics
