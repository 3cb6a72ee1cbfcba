#include "jobspec/presets.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "jobspec/model_config.h"

namespace gantry::jobspec {

absl::string_view BaselinePresetName(BaselineKind kind) {
  switch (kind) {
    case BaselineKind::kTemplate:
      return "baseline-template";
    case BaselineKind::kSpots:
      return "baseline-spots";
    case BaselineKind::kSpotsSmeared:
      return "baseline-spots-smeared";
  }
  return "baseline-spots";
}

std::optional<BaselineKind> BaselineKindOfPreset(absl::string_view preset) {
  if (preset == "baseline-template") return BaselineKind::kTemplate;
  if (preset == "baseline-spots") return BaselineKind::kSpots;
  if (preset == "baseline-spots-smeared") return BaselineKind::kSpotsSmeared;
  return std::nullopt;
}

std::vector<std::string> JobPresetNames() {
  std::vector<std::string> names = gan::PresetNames();
  for (BaselineKind kind :
       {BaselineKind::kTemplate, BaselineKind::kSpots, BaselineKind::kSpotsSmeared}) {
    names.emplace_back(BaselinePresetName(kind));
  }
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
