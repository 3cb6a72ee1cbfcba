#include "studies/study_types.h"

#include <cmath>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gantry::studies {

absl::string_view ParameterKindName(ParameterKind kind) {
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

absl::StatusOr<ParameterKind> ParseParameterKind(absl::string_view name) {
  for (ParameterKind kind : {ParameterKind::kContinuous, ParameterKind::kLogContinuous,
                             ParameterKind::kInteger, ParameterKind::kCategorical}) {
    if (name == ParameterKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown parameter kind \"", name,
                   "\": use continuous, log-continuous, integer or categorical"));
}

std::string FormatParameterValue(const ParameterValue& value) {
  if (const double* number = std::get_if<double>(&value)) {
    // %.17g reads back to the same double; shorter forms are kept when they are exact.
    char text[40];
    for (int digits = 6; digits <= 17; ++digits) {
      std::snprintf(text, sizeof(text), "%.*g", digits, *number);
      if (std::strtod(text, nullptr) == *number || std::isnan(*number)) break;
    }
    return text;
  }
  if (const int64_t* integer = std::get_if<int64_t>(&value)) return absl::StrCat(*integer);
  return std::get<std::string>(value);
}

std::string FormatAssignment(const Assignment& assignment) {
  return absl::StrJoin(assignment, ",", [](std::string* out, const auto& entry) {
    absl::StrAppend(out, entry.first, "=", FormatParameterValue(entry.second));
  });
}

}  // namespace gantry::studies
