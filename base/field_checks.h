// Field checks: the building blocks of request and spec checks. Each failure is INVALID_ARGUMENT
// "<field>: <what>" with a google.rpc.BadRequest violation of <field> and the ErrorInfo reason
// kReasonInvalidField, so a client can point at the field and the message says what to change.
#ifndef GANTRY_BASE_FIELD_CHECKS_H_
#define GANTRY_BASE_FIELD_CHECKS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gantry::checks {

inline constexpr absl::string_view kReasonInvalidField = "INVALID_FIELD";
absl::Status Invalid(absl::string_view field, absl::string_view what);
// "<parent>.<child>".
std::string Sub(absl::string_view parent, absl::string_view child);
// Every character is alphanumeric or in `extra`.
bool AllChars(absl::string_view s, absl::string_view extra);
absl::Status CheckInt(int64_t value, int64_t min, int64_t max, absl::string_view field);
absl::Status CheckFinite(double value, absl::string_view field);
// Finite and in [0, max_exclusive).
absl::Status CheckRange01(double value, double max_exclusive, absl::string_view field);
// A yes/no word of a config file, an environment variable or a query parameter: "true" and "1" are
// true, "false" and "0" false, anything else (other case included) nullopt.
std::optional<bool> ParseBoolWord(absl::string_view value);

}  // namespace gantry::checks

#endif  // GANTRY_BASE_FIELD_CHECKS_H_
