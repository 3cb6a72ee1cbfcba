// The presets a job spec may name: the 3DGAN networks (ModelConfig presets, jobspec/model_config.h)
// and the no-network baselines (workers/baseline). One list for the server, which refuses an
// unknown preset at submission, and the worker, which plans and trains it.
#ifndef GANTRY_JOBSPEC_PRESETS_H_
#define GANTRY_JOBSPEC_PRESETS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gantry::jobspec {

enum class BaselineKind {
  kTemplate,  // template + modes, clamped at 0
  kSpots,     // the same, then Poisson spots of the fitted spot energy in every cell
  // the same spots, each depositing an exponential energy of the spot energy's mean (Gamma shape
  // kSmearedSpotShape), so the cells are continuous as a sampling calorimeter's
  kSpotsSmeared,
};
inline constexpr double kSmearedSpotShape = 1.0;

// Whether the kind draws spots (kSpots, kSpotsSmeared), and each spot's Gamma shape (0: whole
// spots; baseline::DrawSpots).
inline bool HasSpots(BaselineKind kind) { return kind != BaselineKind::kTemplate; }
inline double SpotShape(BaselineKind kind) {
  return kind == BaselineKind::kSpotsSmeared ? kSmearedSpotShape : 0.0;
}

// The job-spec presets of the kinds: "baseline-template", "baseline-spots" and
// "baseline-spots-smeared" (empty for a value outside the enum).
absl::string_view BaselinePresetName(BaselineKind kind);
// The kind a preset names; nullopt for every other preset (the networks).
std::optional<BaselineKind> BaselineKindOfPreset(absl::string_view preset);

// Every preset a job spec may name: the networks, then the baselines.
std::vector<std::string> JobPresetNames();
bool IsJobPreset(absl::string_view preset);
// The names for a message: "\"3dgan-25\", ..., \"baseline-template\" or \"baseline-spots\"".
std::string JobPresetList();

}  // namespace gantry::jobspec

#endif  // GANTRY_JOBSPEC_PRESETS_H_
