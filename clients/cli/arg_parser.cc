#include "clients/cli/arg_parser.h"

#include <cmath>
#include <limits>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace gantry::cli {
namespace {

constexpr char kUsagePayloadUrl[] = "gantry.cli/usage";

const FlagSpec* FindFlag(const std::vector<FlagSpec>& flags, const std::string& name) {
  for (const auto& flag : flags) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

}  // namespace

std::optional<std::string> ParsedArgs::Get(const std::string& flag) const {
  auto it = flags_.find(flag);
  if (it == flags_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::GetAll(const std::string& flag) const {
  auto it = flags_.find(flag);
  if (it == flags_.end()) return {};
  return it->second;
}

std::string ParsedArgs::Positional(size_t index) const {
  return index < positionals_.size() ? positionals_[index] : std::string();
}

absl::Status UsageError(const std::string& message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kUsagePayloadUrl, absl::Cord("1"));
  return status;
}

bool IsUsageError(const absl::Status& status) {
  return status.GetPayload(kUsagePayloadUrl).has_value();
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::string& command,
                                     const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& flags,
                                     const std::vector<PositionalSpec>& positionals) {
  ParsedArgs parsed;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!flags_done && arg == "--") {
      flags_done = true;
      continue;
    }
    if (flags_done || arg.size() < 2 || arg[0] != '-' || arg == "-") {
      parsed.AddPositional(arg);
      continue;
    }
    // A negative number is a positional, not a flag (e.g. a rank of -1).
    double ignored;
    if (arg[1] != '-' && absl::SimpleAtod(arg, &ignored)) {
      parsed.AddPositional(arg);
      continue;
    }
    if (arg[1] != '-') {
      return UsageError(absl::StrCat("unknown flag '", arg, "' for 'gantry ", command,
                                     "' (flags are written --name)"));
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const FlagSpec* spec = FindFlag(flags, name);
    if (spec == nullptr) {
      return UsageError(absl::StrCat("unknown flag --", name, " for 'gantry ", command,
                                     "'; see 'gantry ", command, " --help'"));
    }
    if (!spec->repeatable && parsed.Has(name)) {
      return UsageError(absl::StrCat("flag --", name, " given more than once"));
    }
    if (spec->metavar.empty()) {  // boolean
      if (inline_value.has_value()) {
        if (*inline_value != "true" && *inline_value != "false") {
          return UsageError(absl::StrCat(
              "flag --", name, " takes no value (or =true/=false), got '", *inline_value, "'"));
        }
        if (*inline_value == "true") parsed.AddFlag(name, "true");
      } else {
        parsed.AddFlag(name, "true");
      }
      continue;
    }
    if (inline_value.has_value()) {
      parsed.AddFlag(name, *inline_value);
      continue;
    }
    if (i + 1 >= args.size()) {
      return UsageError(absl::StrCat("flag --", name, " needs a value (", spec->metavar, ")"));
    }
    parsed.AddFlag(name, args[++i]);
  }

  size_t required = 0;
  bool variadic = false;
  for (const auto& positional : positionals) {
    if (!positional.optional) ++required;
    if (positional.variadic) variadic = true;
  }
  const size_t given = parsed.positionals().size();
  if (given < required) {
    std::string missing;
    for (size_t i = given; i < positionals.size(); ++i) {
      if (positionals[i].optional) continue;
      absl::StrAppend(&missing, missing.empty() ? "" : " ", positionals[i].name);
    }
    return UsageError(absl::StrCat("'gantry ", command, "' is missing ", missing));
  }
  if (!variadic && given > positionals.size()) {
    return UsageError(absl::StrCat("'gantry ", command, "' got an unexpected argument '",
                                   parsed.positionals()[positionals.size()], "'"));
  }
  return parsed;
}

absl::StatusOr<int> ParseIntFlag(const std::string& flag, const std::string& text) {
  int64_t value;
  if (!absl::SimpleAtoi(text, &value)) {
    return UsageError(absl::StrCat("--", flag, ": '", text, "' is not an integer"));
  }
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
    return UsageError(absl::StrCat("--", flag, ": ", text, " is out of range"));
  }
  return static_cast<int>(value);
}

absl::StatusOr<uint64_t> ParseUint64Flag(const std::string& flag, const std::string& text) {
  uint64_t value;
  if (!absl::SimpleAtoi(text, &value)) {
    return UsageError(absl::StrCat("--", flag, ": '", text, "' is not a non-negative integer"));
  }
  return value;
}

absl::StatusOr<double> ParseDoubleFlag(const std::string& flag, const std::string& text) {
  double value;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    return UsageError(absl::StrCat("--", flag, ": '", text, "' is not a finite number"));
  }
  return value;
}

absl::StatusOr<std::pair<std::string, std::string>> ParseKeyValueFlag(const std::string& flag,
                                                                      const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    return UsageError(absl::StrCat("--", flag, ": '", text, "' is not of the form key=value"));
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

}  // namespace gantry::cli
