// agent_test_daemon: `gantry-worker daemon` without LibTorch (the same flags, options and
// DaemonMain), so the agent tests run the real daemon process in builds without the torch worker.
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/flags.h"
#include "workers/agent/agent_flags.h"
#include "workers/agent/daemon_main.h"
#include "workers/app/worker_flags.h"

namespace {

int BadCommandLine(const absl::Status& status) {
  std::cerr << "gantry-worker daemon: " << status.message() << "\n" << gantry::agent::kAgentUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool help = false;
  const absl::StatusOr<std::vector<std::string>> positional = gantry::ParseFlags(argc, argv, &help);
  if (help) {
    std::cout << gantry::agent::kAgentUsage;
    return 0;
  }
  if (!positional.ok()) return BadCommandLine(positional.status());
  if (!positional->empty()) {
    return BadCommandLine(
        absl::InvalidArgumentError("unexpected argument \"" + positional->front() + "\""));
  }
  if (absl::Status status = gantry::app::CheckFlagsApplyTo("daemon"); !status.ok()) {
    return BadCommandLine(status);
  }
  absl::StatusOr<gantry::agent::AgentOptions> options = gantry::app::DaemonOptionsFromFlags();
  if (!options.ok()) return BadCommandLine(options.status());
  return gantry::agent::DaemonMain(*std::move(options));
}
