// Completion: the bash completion script of `gantry`, generated from the command table.
#ifndef GANTRY_CLIENTS_CLI_COMPLETION_H_
#define GANTRY_CLIENTS_CLI_COMPLETION_H_

#include <string>
#include <vector>

#include "clients/cli/command.h"

namespace gantry::cli {

// A bash script defining and registering (`complete -F`) the completion of `gantry`: command
// groups and subcommands by position, each command's flags plus `global_flags` after a dash,
// files for positional arguments. Flags that take a value consume the next word. Pure function.
std::string BashCompletionScript(const std::vector<Command>& commands,
                                 const std::vector<FlagSpec>& global_flags);

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_COMPLETION_H_
