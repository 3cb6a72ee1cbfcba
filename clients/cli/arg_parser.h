// ArgParser: parses one subcommand's arguments (flags and positionals) against a declared spec.
#ifndef GANTRY_CLIENTS_CLI_ARG_PARSER_H_
#define GANTRY_CLIENTS_CLI_ARG_PARSER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gantry::cli {

// One flag a command accepts. Flags are written `--name value`, `--name=value` or, for booleans,
// `--name`.
struct FlagSpec {
  std::string name;     // without the leading dashes, e.g. "epochs"
  std::string metavar;  // e.g. "N"; empty for a boolean flag
  std::string help;
  bool repeatable = false;  // may be given several times (values are kept in order)
};

// One positional argument.
struct PositionalSpec {
  std::string name;  // e.g. "JOB_ID"
  std::string help;
  bool optional = false;
  bool variadic = false;  // takes all remaining positionals (must be last)
};

// What the parser produced: flag values by name and the positionals in order.
class ParsedArgs {
 public:
  bool Has(const std::string& flag) const { return flags_.count(flag) > 0; }
  // The last value given for `flag`, or nullopt. Boolean flags have the value "true".
  std::optional<std::string> Get(const std::string& flag) const;
  // Every value given for a repeatable flag, in order.
  std::vector<std::string> GetAll(const std::string& flag) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  // The positional at `index`, or "" when absent.
  std::string Positional(size_t index) const;

  void AddFlag(const std::string& name, const std::string& value) { flags_[name].push_back(value); }
  void AddPositional(const std::string& value) { positionals_.push_back(value); }

 private:
  std::map<std::string, std::vector<std::string>> flags_;
  std::vector<std::string> positionals_;
};

// A usage error: the user typed something the command does not accept. Exit code 2.
absl::Status UsageError(const std::string& message);
bool IsUsageError(const absl::Status& status);

// The usage error for CLI11's ArgumentMismatch text ("--NAME: 1 required ..."), a value flag at the
// end of the line: "flag --NAME needs a value (METAVAR)", METAVAR from `flags` ("VALUE" if
// unknown).
absl::Status MissingValueError(const std::string& mismatch_text,
                               const std::vector<FlagSpec>& flags);

// Parses `args` (the tokens after the command path) against `flags` and `positionals`.
// `command` (e.g. "jobs submit") names the command in error messages. `--` ends flag parsing.
// `--help`/`-h` is not handled here; callers check for it before parsing.
absl::StatusOr<ParsedArgs> ParseArgs(const std::string& command,
                                     const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& flags,
                                     const std::vector<PositionalSpec>& positionals);

// Parses `text` as a 32-bit integer for flag `flag`; the error names the flag.
absl::StatusOr<int> ParseIntFlag(const std::string& flag, const std::string& text);
absl::StatusOr<uint64_t> ParseUint64Flag(const std::string& flag, const std::string& text);
// Parses a finite double.
absl::StatusOr<double> ParseDoubleFlag(const std::string& flag, const std::string& text);
// Parses "key=value" (key non-empty).
absl::StatusOr<std::pair<std::string, std::string>> ParseKeyValueFlag(const std::string& flag,
                                                                      const std::string& text);

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_ARG_PARSER_H_
