// DaemonMain: the `gantry-worker daemon` subcommand: runs a WorkerAgent configured by validated
// AgentOptions until SIGTERM/SIGINT and returns the process exit code.
#ifndef GANTRY_WORKERS_AGENT_DAEMON_MAIN_H_
#define GANTRY_WORKERS_AGENT_DAEMON_MAIN_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "workers/agent/agent_options.h"

namespace gantry::agent {

class WorkerAgent;

// A part of the daemon besides the ranks (the dataset cache report, generation serving), supplied
// by the gantry-worker executable so that this library stays torch-free.
class DaemonExtension {
 public:
  virtual ~DaemonExtension() = default;
  // Called once before the agent runs: start servers, add heartbeat and register sources. An error
  // stops the daemon before it registers (exit code 1).
  virtual absl::Status Start(WorkerAgent& agent) = 0;
  // Called once after the agent stopped (all ranks ended).
  virtual void Stop() = 0;
};

// Builds an extension from the resolved options (nullptr = not enabled by the flags).
using DaemonExtensionFactory =
    std::function<absl::StatusOr<std::unique_ptr<DaemonExtension>>(const AgentOptions&)>;

// `options` come from BuildAgentOptions and ResolveAgentOptions (agent_flags.h). Returns 0 after a
// clean stop (signal), 1 when an extension fails to start or the server refuses the worker for
// good (e.g. a bad join token). Blocks SIGTERM and SIGINT in the calling thread before starting any
// thread; call it from main before other threads exist. `extensions` are built from the options and
// started before the agent registers.
int DaemonMain(AgentOptions options, const std::vector<DaemonExtensionFactory>& extensions = {});

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_DAEMON_MAIN_H_
