#include "studies/search_space.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gantry::studies {
namespace {

constexpr size_t kMaxNameLength = 128;
constexpr size_t kMaxChoiceLength = 256;

bool IsNameCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-' || c == '/';
}

absl::Status Invalid(const Parameter& parameter, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("search space parameter \"", parameter.name,
                                                 "\" (", ParameterKindName(parameter.kind),
                                                 "): ", what));
}

absl::Status ValidateName(const Parameter& parameter) {
  if (parameter.name.empty()) {
    return absl::InvalidArgumentError("search space parameter with an empty name: name it");
  }
  if (parameter.name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("search space parameter name longer than ",
                                                   kMaxNameLength, " characters: shorten it"));
  }
  for (char c : parameter.name) {
    if (!IsNameCharacter(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("search space parameter name \"", absl::CHexEscape(parameter.name),
                       "\": use only letters, digits, '_', '.', '-' and '/'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateChoice(const Parameter& parameter, const std::string& choice) {
  if (choice.empty()) return Invalid(parameter, "an empty choice: remove it");
  if (choice.size() > kMaxChoiceLength) {
    return Invalid(parameter, absl::StrCat("a choice longer than ", kMaxChoiceLength,
                                           " characters: shorten it"));
  }
  for (unsigned char c : choice) {
    if (c == ',' || c == '=' || c < 0x20 || c == 0x7f) {
      return Invalid(parameter, absl::StrCat("choice \"", absl::CHexEscape(choice),
                                             "\" holds ',', '=' or a control character: "
                                             "remove them"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateParameter(const Parameter& parameter) {
  if (parameter.kind == ParameterKind::kCategorical) {
    if (parameter.choices.empty()) return Invalid(parameter, "no choices: give at least one");
    if (parameter.choices.size() > SearchSpace::kMaxChoices) {
      return Invalid(parameter, absl::StrCat(parameter.choices.size(), " choices: at most ",
                                             SearchSpace::kMaxChoices, " are allowed"));
    }
    std::set<absl::string_view> seen;
    for (const std::string& choice : parameter.choices) {
      if (absl::Status status = ValidateChoice(parameter, choice); !status.ok()) return status;
      if (!seen.insert(choice).second) {
        return Invalid(parameter,
                       absl::StrCat("choice \"", choice, "\" appears twice: list it once"));
      }
    }
    return absl::OkStatus();
  }
  if (!parameter.choices.empty()) {
    return Invalid(parameter,
                   "choices are for categorical parameters only: remove them or make "
                   "the parameter categorical");
  }
  if (!std::isfinite(parameter.low) || !std::isfinite(parameter.high)) {
    return Invalid(parameter, "bounds must be finite numbers");
  }
  if (parameter.low >= parameter.high) {
    return Invalid(parameter, absl::StrCat("empty or inverted range [", parameter.low, ", ",
                                           parameter.high, "]: low must be below high"));
  }
  if (!std::isfinite(parameter.high - parameter.low)) {
    return Invalid(parameter, absl::StrCat("range [", parameter.low, ", ", parameter.high,
                                           "] is wider than a double holds: narrow it"));
  }
  if (parameter.kind == ParameterKind::kLogContinuous && parameter.low <= 0) {
    return Invalid(parameter, absl::StrCat("log scale needs low > 0 (got ", parameter.low,
                                           "): raise low or use a continuous parameter"));
  }
  if (parameter.kind == ParameterKind::kInteger) {
    // 2^53: every integer up to it is a double, so bounds and values convert exactly.
    constexpr double kLargestExact = 9007199254740992.0;
    if (parameter.low != std::floor(parameter.low) ||
        parameter.high != std::floor(parameter.high)) {
      return Invalid(parameter, absl::StrCat("bounds [", parameter.low, ", ", parameter.high,
                                             "] must be integers"));
    }
    if (std::abs(parameter.low) > kLargestExact || std::abs(parameter.high) > kLargestExact) {
      return Invalid(parameter, "bounds must lie within +-2^53");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckValue(const Parameter& parameter, const ParameterValue& value) {
  switch (parameter.kind) {
    case ParameterKind::kContinuous:
    case ParameterKind::kLogContinuous: {
      const double* number = std::get_if<double>(&value);
      if (number == nullptr) return Invalid(parameter, "the value must be a number (double)");
      if (!(*number >= parameter.low && *number <= parameter.high)) {
        return Invalid(parameter,
                       absl::StrCat("value ", FormatParameterValue(value), " lies outside [",
                                    parameter.low, ", ", parameter.high, "]"));
      }
      return absl::OkStatus();
    }
    case ParameterKind::kInteger: {
      const int64_t* integer = std::get_if<int64_t>(&value);
      if (integer == nullptr) return Invalid(parameter, "the value must be an integer");
      if (*integer < parameter.low || *integer > parameter.high) {
        return Invalid(parameter, absl::StrCat("value ", *integer, " lies outside [", parameter.low,
                                               ", ", parameter.high, "]"));
      }
      return absl::OkStatus();
    }
    case ParameterKind::kCategorical: {
      const std::string* text = std::get_if<std::string>(&value);
      if (text == nullptr) return Invalid(parameter, "the value must be one of the choices");
      for (const std::string& choice : parameter.choices) {
        if (choice == *text) return absl::OkStatus();
      }
      return Invalid(parameter,
                     absl::StrCat("\"", absl::CHexEscape(*text), "\" is not one of the choices"));
    }
  }
  return Invalid(parameter, "unknown kind");
}

}  // namespace

absl::Status SearchSpace::Validate() const {
  if (parameters_.empty()) {
    return absl::InvalidArgumentError("the search space has no parameters: give at least one");
  }
  if (parameters_.size() > kMaxParameters) {
    return absl::InvalidArgumentError(absl::StrCat("the search space has ", parameters_.size(),
                                                   " parameters: at most ", kMaxParameters,
                                                   " are allowed"));
  }
  std::set<absl::string_view> names;
  for (const Parameter& parameter : parameters_) {
    if (absl::Status status = ValidateName(parameter); !status.ok()) return status;
    if (!names.insert(parameter.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("search space parameter \"", parameter.name,
                                                     "\" is defined twice: rename or remove one"));
    }
    if (absl::Status status = ValidateParameter(parameter); !status.ok()) return status;
  }
  return absl::OkStatus();
}

const Parameter* SearchSpace::Find(absl::string_view name) const {
  for (const Parameter& parameter : parameters_) {
    if (parameter.name == name) return &parameter;
  }
  return nullptr;
}

absl::Status SearchSpace::CheckAssignment(const Assignment& assignment) const {
  for (const auto& [name, value] : assignment) {
    if (Find(name) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown parameter \"", absl::CHexEscape(name),
                                                     "\": it is not in the search space"));
    }
  }
  for (const Parameter& parameter : parameters_) {
    auto found = assignment.find(parameter.name);
    if (found == assignment.end()) return Invalid(parameter, "missing from the assignment");
    if (absl::Status status = CheckValue(parameter, found->second); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<ParameterValue> SearchSpace::ParseValue(absl::string_view name,
                                                       absl::string_view text) const {
  const Parameter* parameter = Find(name);
  if (parameter == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown parameter \"", absl::CHexEscape(name),
                                                   "\": it is not in the search space"));
  }
  ParameterValue value;
  switch (parameter->kind) {
    case ParameterKind::kContinuous:
    case ParameterKind::kLogContinuous: {
      double number = 0;
      if (!absl::SimpleAtod(text, &number) || !std::isfinite(number)) {
        return Invalid(*parameter,
                       absl::StrCat("\"", absl::CHexEscape(text), "\" is not a finite number"));
      }
      value = number;
      break;
    }
    case ParameterKind::kInteger: {
      int64_t integer = 0;
      if (!absl::SimpleAtoi(text, &integer)) {
        return Invalid(*parameter,
                       absl::StrCat("\"", absl::CHexEscape(text), "\" is not an integer"));
      }
      value = integer;
      break;
    }
    case ParameterKind::kCategorical:
      value = std::string(text);
      break;
  }
  if (absl::Status status = CheckValue(*parameter, value); !status.ok()) return status;
  return value;
}

absl::StatusOr<Assignment> SearchSpace::ParseAssignment(absl::string_view text) const {
  Assignment assignment;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> name_value = absl::StrSplit(item, '=');
    if (item.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("assignment item \"", absl::CHexEscape(item), "\": write it as name=value"));
    }
    absl::StatusOr<ParameterValue> value = ParseValue(name_value.first, name_value.second);
    if (!value.ok()) return value.status();
    if (!assignment.emplace(std::string(name_value.first), *std::move(value)).second) {
      return absl::InvalidArgumentError(absl::StrCat("assignment names \"", name_value.first,
                                                     "\" twice: give each parameter once"));
    }
  }
  if (absl::Status status = CheckAssignment(assignment); !status.ok()) return status;
  return assignment;
}

}  // namespace gantry::studies
