#include "clients/cli/arg_parser.h"

#include <cmath>
#include <limits>

#include "CLI/CLI.hpp"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
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

absl::Status MissingValueError(const std::string& mismatch_text,
                               const std::vector<FlagSpec>& flags) {
  const size_t colon = mismatch_text.find(':');
  const std::string name = absl::StartsWith(mismatch_text, "--") && colon != std::string::npos
                               ? mismatch_text.substr(2, colon - 2)
                               : mismatch_text;
  const FlagSpec* spec = FindFlag(flags, name);
  return UsageError(absl::StrCat("flag --", name, " needs a value (",
                                 spec != nullptr ? spec->metavar : "VALUE", ")"));
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::string& command,
                                     const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& flags,
                                     const std::vector<PositionalSpec>& positionals) {
  // CLI11 splits the words (--name value, --name=value, booleans, "--", positionals, unknown flags
  // left over); the rules and messages of gantry's command line are checked here, on its results.
  CLI::App app("gantry " + command, "gantry");
  app.set_help_flag();  // --help is CliApp's
  app.allow_extras(true);
  std::vector<CLI::Option*> options;
  for (const FlagSpec& spec : flags) {
    CLI::Option* option = spec.metavar.empty() ? app.add_flag("--" + spec.name)
                                               : app.add_option("--" + spec.name)->expected(1);
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    options.push_back(option);
  }
  std::vector<std::string> words;
  app.add_option("arguments", words);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& error) {
    return MissingValueError(error.what(), flags);
  } catch (const CLI::ParseError& error) {
    return UsageError(absl::StrCat("'gantry ", command, "': ", error.what()));
  }
  for (const std::string& extra : app.remaining()) {
    if (extra == "--") continue;
    if (!absl::StartsWith(extra, "--")) {
      return UsageError(absl::StrCat("unknown flag '", extra, "' for 'gantry ", command,
                                     "' (flags are written --name)"));
    }
    const std::string name = extra.substr(2, extra.find('=') - 2);
    return UsageError(absl::StrCat("unknown flag --", name, " for 'gantry ", command,
                                   "'; see 'gantry ", command, " --help'"));
  }

  ParsedArgs parsed;
  for (size_t i = 0; i < flags.size(); ++i) {
    const FlagSpec& spec = flags[i];
    const std::vector<std::string>& values = options[i]->results();
    if (values.empty()) continue;
    if (!spec.repeatable && values.size() > 1) {
      return UsageError(absl::StrCat("flag --", spec.name, " given more than once"));
    }
    for (const std::string& value : values) {
      if (!spec.metavar.empty()) {
        parsed.AddFlag(spec.name, value);
      } else if (value != "true" && value != "false") {
        return UsageError(absl::StrCat("flag --", spec.name,
                                       " takes no value (or =true/=false), got '", value, "'"));
      } else if (value == "true") {
        parsed.AddFlag(spec.name, "true");
      }
    }
  }
  for (std::string& word : words) parsed.AddPositional(std::move(word));

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
