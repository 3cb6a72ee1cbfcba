#include "base/field_checks.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_details.h"
#include "base/status_macros.h"

namespace gantry::checks {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return SetErrorReason(
      AddFieldViolation(absl::InvalidArgumentError(absl::StrCat(field, ": ", what)), field, what),
      kReasonInvalidField);
}

std::string Sub(absl::string_view parent, absl::string_view child) {
  return absl::StrCat(parent, ".", child);
}

bool AllChars(absl::string_view s, absl::string_view extra) {
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        extra.find(c) == absl::string_view::npos) {
      return false;
    }
  }
  return true;
}

absl::Status CheckInt(int64_t value, int64_t min, int64_t max, absl::string_view field) {
  if (value < min || value > max) {
    return Invalid(field, absl::StrCat("is ", value, "; set it to a value in ", min, "..", max));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(double value, absl::string_view field) {
  if (!std::isfinite(value)) {
    return Invalid(field, absl::StrCat("is ", value, "; it must be a finite number"));
  }
  return absl::OkStatus();
}

std::optional<bool> ParseBoolWord(absl::string_view value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  return std::nullopt;
}

absl::Status CheckRange01(double value, double max_exclusive, absl::string_view field) {
  RETURN_IF_ERROR(CheckFinite(value, field));
  if (value < 0 || value >= max_exclusive) {
    return Invalid(field, absl::StrCat("is ", value, "; it must be in [0, ", max_exclusive, ")"));
  }
  return absl::OkStatus();
}

}  // namespace gantry::checks
