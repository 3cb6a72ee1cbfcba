#include "server/studies/study_types.h"

#include "absl/status/status.h"

namespace gantry::studies {

std::string_view ParameterKindName(ParameterKind kind) {
  switch (kind) {
    case ParameterKind::kContinuous:
      return "continuous";
    case ParameterKind::kLogContinuous:
      return "log-continuous";
    case ParameterKind::kInteger:
      return "integer";
    case ParameterKind::kCategorical:
      return "categorical";
  }
  return "unknown";
}

absl::StatusOr<ParameterKind> ParseParameterKind(std::string_view) {
  return absl::UnimplementedError("ParseParameterKind: not implemented yet");
}

std::string FormatParameterValue(const ParameterValue&) { return ""; }

std::string FormatAssignment(const Assignment&) { return ""; }

}  // namespace gantry::studies
