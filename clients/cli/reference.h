// MarkdownReference: the `gantry` command reference as Markdown (docs/CLI.md), generated from the
// command table so that it cannot drift from `gantry help`.
#ifndef GANTRY_CLIENTS_CLI_REFERENCE_H_
#define GANTRY_CLIENTS_CLI_REFERENCE_H_

#include <string>
#include <vector>

#include "clients/cli/command.h"

namespace gantry::cli {

// The global flags, an index of the commands and one section per command (usage, description,
// arguments, flags), in table order. Pure function: the same table gives the same bytes.
std::string MarkdownReference(const std::vector<Command>& commands,
                              const std::vector<FlagSpec>& global_flags);

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_REFERENCE_H_
