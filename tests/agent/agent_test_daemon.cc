// agent_test_daemon: `gantry-worker daemon` without LibTorch (the same DaemonMain), so the agent
// tests run the real daemon process in builds without the torch worker.
#include <string>
#include <vector>

#include "workers/agent/daemon_main.h"

int main(int argc, char** argv) {
  return gantry::agent::DaemonMain(std::vector<std::string>(argv + 1, argv + argc));
}
