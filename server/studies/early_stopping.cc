#include "server/studies/early_stopping.h"

namespace gantry::studies {

absl::string_view EarlyStoppingRuleName(EarlyStoppingRule rule) {
  switch (rule) {
    case EarlyStoppingRule::kNone:
      return "none";
    case EarlyStoppingRule::kMedian:
      return "median";
    case EarlyStoppingRule::kAsha:
      return "asha";
  }
  return "unknown";
}

absl::StatusOr<EarlyStoppingRule> ParseEarlyStoppingRule(absl::string_view) {
  return absl::UnimplementedError("ParseEarlyStoppingRule: not implemented yet");
}

absl::Status ValidateEarlyStopping(const EarlyStoppingOptions&) {
  return absl::UnimplementedError("ValidateEarlyStopping: not implemented yet");
}

absl::StatusOr<StopDecision> ShouldStopTrial(absl::Span<const IntermediateValue>,
                                             absl::Span<const std::vector<IntermediateValue>>,
                                             const EarlyStoppingOptions&) {
  return absl::UnimplementedError("ShouldStopTrial: not implemented yet");
}

}  // namespace gantry::studies
