#include "workers/agent/daemon_main.h"

#include <signal.h>

#include <atomic>
#include <ctime>
#include <iostream>
#include <thread>

#include "absl/status/statusor.h"
#include "gantry/base/signals.h"
#include "workers/agent/agent_flags.h"
#include "workers/agent/worker_agent.h"

namespace gantry::agent {

int DaemonMain(const std::vector<std::string>& args,
               const std::vector<DaemonExtensionFactory>& extensions) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::cout << kAgentUsage;
      return 0;
    }
  }
  absl::StatusOr<AgentOptions> options = ParseAgentFlags(args);
  absl::Status status = options.status();
  if (status.ok()) status = ResolveAgentOptions(&*options);
  if (!status.ok()) {
    std::cerr << "gantry-worker daemon: " << status.message() << "\n" << kAgentUsage;
    return 2;
  }

  // Signals are taken synchronously by one thread; every other thread (gRPC's, the supervisors')
  // inherits the blocked mask. Rank processes unblock them before exec.
  const sigset_t signals = BlockTerminationSignals();

  std::vector<std::unique_ptr<DaemonExtension>> parts;
  for (const DaemonExtensionFactory& make : extensions) {
    absl::StatusOr<std::unique_ptr<DaemonExtension>> part = make(*options);
    if (!part.ok()) {
      std::cerr << "gantry-worker daemon: " << part.status().message() << std::endl;
      return 1;
    }
    if (*part != nullptr) parts.push_back(*std::move(part));
  }
  WorkerAgent agent(*std::move(options));
  for (auto& part : parts) {
    if (absl::Status st = part->Start(agent); !st.ok()) {
      std::cerr << "gantry-worker daemon: " << st.message() << std::endl;
      for (auto& started : parts) {
        if (started.get() == part.get()) break;
        started->Stop();
      }
      return 1;
    }
  }
  std::atomic<bool> done{false};
  std::thread signal_thread([&] {
    while (!done.load()) {
      timespec timeout{0, 200 * 1000 * 1000};
      const int sig = sigtimedwait(&signals, nullptr, &timeout);
      if (sig == SIGINT || sig == SIGTERM) {
        std::cerr << "gantry-worker: signal " << sig << ", stopping ranks and exiting" << std::endl;
        agent.Stop();
        return;
      }
    }
  });
  status = agent.Run();
  done.store(true);
  signal_thread.join();
  for (auto& part : parts) part->Stop();
  if (!status.ok()) {
    std::cerr << "gantry-worker daemon: the server refused this worker: " << status.ToString()
              << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace gantry::agent
