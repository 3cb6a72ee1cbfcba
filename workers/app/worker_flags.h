// WorkerFlags: the ABSL_FLAGs of gantry-worker (one flag per meaning across its subcommands) and
// the functions that turn their values, after gantry::ParseFlags in main, into each subcommand's
// validated options. Torch-free, so the agent tests' daemon shares the daemon's flags.
#ifndef GANTRY_WORKERS_APP_WORKER_FLAGS_H_
#define GANTRY_WORKERS_APP_WORKER_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "workers/agent/agent_flags.h"
#include "workers/agent/agent_options.h"
#include "workers/app/local_commands.h"
#include "workers/app/rank_command.h"

namespace gantry::app {

// INVALID_ARGUMENT naming the first flag given a value that `command` (daemon, rank, local-train,
// local-generate, toymc) does not take.
absl::Status CheckFlagsApplyTo(const std::string& command);

// The daemon's flag values as given (validated by agent::BuildAgentOptions).
agent::AgentFlags DaemonFlags();

// BuildAgentOptions and ResolveAgentOptions of the daemon's flags (creates the cache and work
// directories, reads --join-token-file).
absl::StatusOr<agent::AgentOptions> DaemonOptionsFromFlags();

// The daemon's --metrics-listen, checked as HOST:PORT (INVALID_ARGUMENT naming the flag); empty =
// no /metrics endpoint.
absl::StatusOr<std::string> DaemonMetricsListenFromFlags();

// The rank's flags (its credential comes in the file --credential-file names, never on argv or in
// the environment). Required flags are checked by RunRankCommand, which reports them through the
// control pipe.
absl::StatusOr<RankCommandOptions> RankOptionsFromFlags();

absl::StatusOr<LocalTrainOptions> LocalTrainOptionsFromFlags();
absl::StatusOr<LocalGenerateOptions> LocalGenerateOptionsFromFlags();
absl::StatusOr<ExportOptions> ExportOptionsFromFlags();
ToyMcOptions ToyMcOptionsFromFlags();
// verify-checkpoint's --fd.
int VerifyCheckpointFdFromFlags();

}  // namespace gantry::app

#endif  // GANTRY_WORKERS_APP_WORKER_FLAGS_H_
