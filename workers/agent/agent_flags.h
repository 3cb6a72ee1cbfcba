// AgentFlags: parses the command line of `gantry-worker daemon` into AgentOptions (pure: no I/O
// except where noted), so every flag error is unit-testable.
#ifndef GANTRY_WORKERS_AGENT_AGENT_FLAGS_H_
#define GANTRY_WORKERS_AGENT_AGENT_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "workers/agent/agent_options.h"

namespace gantry::agent {

// The flag reference printed by `gantry-worker daemon --help`.
extern const char kAgentUsage[];

// Parses `args` (the arguments after "daemon"; --flag=value or --flag value). INVALID_ARGUMENT
// with a message naming the offending flag for unknown flags, missing values, bad numbers or
// ranges, a missing --server or join token, and --device gpu in a build without GANTRY_WITH_CUDA.
// Leaves name empty when --name is absent (the caller fills in the host name) and work_dir empty
// when --work-dir is absent (= <cache_dir>/work).
absl::StatusOr<AgentOptions> ParseAgentFlags(const std::vector<std::string>& args);

// Fills the defaults that need the environment: join_token from join_token_file (trimmed),
// name from the host name, cache_dir/work_dir made absolute and work_dir defaulted. Creates
// cache_dir and work_dir. INVALID_ARGUMENT naming the flag when a file or directory fails.
absl::Status ResolveAgentOptions(AgentOptions* options);

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_AGENT_FLAGS_H_
