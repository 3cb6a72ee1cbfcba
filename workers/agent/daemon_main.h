// DaemonMain: the `gantry-worker daemon` subcommand: parses its flags, runs a WorkerAgent until
// SIGTERM/SIGINT and returns the process exit code.
#ifndef GANTRY_WORKERS_AGENT_DAEMON_MAIN_H_
#define GANTRY_WORKERS_AGENT_DAEMON_MAIN_H_

#include <string>
#include <vector>

namespace gantry::agent {

// `args` are the arguments after "daemon". Returns 0 after a clean stop (signal), 2 for invalid
// flags (the message names the flag), 1 when the server refuses the worker for good (e.g. a bad
// join token). Blocks SIGTERM and SIGINT in the calling thread before starting any thread; call
// it from main before other threads exist.
int DaemonMain(const std::vector<std::string>& args);

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_DAEMON_MAIN_H_
