#include "jobspec/presets.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "jobspec/model_config.h"

namespace gantry::jobspec {

namespace {

// Each baseline kind and its preset name, in the order JobPresetNames lists them.
struct BaselinePreset {
  BaselineKind kind;
  absl::string_view name;
};
constexpr BaselinePreset kBaselinePresets[] = {
    {BaselineKind::kTemplate, "baseline-template"},
    {BaselineKind::kSpots, "baseline-spots"},
    {BaselineKind::kSpotsSmeared, "baseline-spots-smeared"},
};

}  // namespace

absl::string_view BaselinePresetName(BaselineKind kind) {
  for (const BaselinePreset& p : kBaselinePresets) {
    if (p.kind == kind) return p.name;
  }
  return {};
}

std::optional<BaselineKind> BaselineKindOfPreset(absl::string_view preset) {
  for (const BaselinePreset& p : kBaselinePresets) {
    if (p.name == preset) return p.kind;
  }
  return std::nullopt;
}

std::vector<std::string> JobPresetNames() {
  std::vector<std::string> names = gan::PresetNames();
  for (const BaselinePreset& p : kBaselinePresets) names.emplace_back(p.name);
  return names;
}

bool IsJobPreset(absl::string_view preset) {
  const std::vector<std::string> names = JobPresetNames();
  return std::find(names.begin(), names.end(), preset) != names.end();
}

std::string JobPresetList() {
  const std::vector<std::string> names = JobPresetNames();
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) absl::StrAppend(&list, i + 1 == names.size() ? " or " : ", ");
    absl::StrAppend(&list, "\"", names[i], "\"");
  }
  return list;
}

}  // namespace gantry::jobspec
