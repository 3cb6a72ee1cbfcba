// CliApp: the `gantry` command line: global flags, command lookup, help, error printing, exit
// codes.
#ifndef GANTRY_CLIENTS_CLI_CLI_APP_H_
#define GANTRY_CLIENTS_CLI_CLI_APP_H_

#include <ostream>
#include <string>
#include <vector>

#include "clients/cli/cli_config.h"
#include "clients/cli/command.h"

namespace gantry::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError =
    1;  // the server or the environment refused (printed as CODE: message)
inline constexpr int kExitUsage = 2;  // the command line itself is wrong

// Flags accepted before or after any command.
std::vector<FlagSpec> GlobalFlags();

class CliApp {
 public:
  CliApp(std::vector<Command> commands, ConfigEnvironment env)
      : commands_(std::move(commands)), env_(std::move(env)) {}

  // Runs the command line `args` (without the program name). Errors are printed to `err` as
  // "gantry: CODE: message" (or "gantry: usage: ..." for usage errors). Returns the exit code.
  int Run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
          bool err_is_tty) const;

  void PrintUsage(std::ostream& out) const;
  void PrintCommandHelp(const Command& command, std::ostream& out) const;

 private:
  // The command whose path is the longest prefix of `words`, or nullptr; `*consumed` = its path
  // length.
  const Command* Find(const std::vector<std::string>& words, size_t* consumed) const;
  // Prints the subcommands under `prefix` (e.g. "jobs"); false when there are none.
  bool PrintGroupHelp(const std::vector<std::string>& prefix, std::ostream& out) const;
  // "gantry help [topic...]": the usage, a command's help or a group's commands.
  int RunHelp(const std::vector<std::string>& topic, std::ostream& out, std::ostream& err) const;
  // The length of the longest prefix of `words` that is a group of commands; 0 for none.
  size_t GroupPrefixLength(const std::vector<std::string>& words) const;
  // Words that name no command: a group's help or a usage error.
  int ReportUnknownCommand(const std::vector<std::string>& words, bool help, std::ostream& out,
                           std::ostream& err) const;

  std::vector<Command> commands_;
  ConfigEnvironment env_;
};

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_CLI_APP_H_
