// Command: one `gantry` subcommand (its path, usage and handler) and the context a handler runs in.
#ifndef GANTRY_CLIENTS_CLI_COMMAND_H_
#define GANTRY_CLIENTS_CLI_COMMAND_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "clients/cli/arg_parser.h"
#include "clients/cli/connection.h"

namespace gantry::cli {

// What a handler may use. Output for people and scripts goes to `out`, diagnostics and progress to
// `err`.
struct CommandContext {
  const ParsedArgs& args;
  bool json = false;        // --json: print protobuf JSON instead of tables
  bool err_is_tty = false;  // show progress bars on `err`
  std::ostream& out;
  std::ostream& err;
  // Returns the connection (created on first use from the resolved configuration).
  std::function<absl::StatusOr<Connection*>()> connect;
  // A handler that succeeded but must still exit non-zero (e.g. a watched job that FAILED) sets
  // this.
  int exit_code = 0;
};

using CommandHandler = std::function<absl::Status(CommandContext&)>;

struct Command {
  std::vector<std::string> path;  // e.g. {"jobs", "submit"}
  std::string summary;            // one line for `gantry help`
  std::string description;        // paragraph for `gantry jobs submit --help`; may be empty
  std::vector<PositionalSpec> positionals;
  std::vector<FlagSpec> flags;
  CommandHandler run;
};

// Registration, one function per command group (commands_<group>.cc).
void AddJobCommands(std::vector<Command>* commands);
void AddDatasetCommands(std::vector<Command>* commands);
void AddModelCommands(std::vector<Command>* commands);
void AddAdminCommands(std::vector<Command>* commands);
void AddPoolCommands(std::vector<Command>* commands);
void AddCostCommands(std::vector<Command>* commands);
void AddStudyCommands(std::vector<Command>* commands);
void AddMiscCommands(std::vector<Command>* commands);  // health, generate, config

// Every command, in the order `gantry help` lists them.
std::vector<Command> AllCommands();

// "gantry jobs get JOB_ID [flags]": the command's path, its positionals and "[flags]" when it has
// any.
std::string UsageLine(const Command& command);

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_COMMAND_H_
