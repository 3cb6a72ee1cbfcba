// AgentFlags: the flag values of `gantry-worker daemon` as given on the command line, and
// BuildAgentOptions, which validates them into AgentOptions (pure), so every value error is
// unit-testable.
#ifndef GANTRY_WORKERS_AGENT_AGENT_FLAGS_H_
#define GANTRY_WORKERS_AGENT_AGENT_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "workers/agent/agent_options.h"

namespace gantry::agent {

// The flag reference printed by `gantry-worker daemon --help`.
extern const char kAgentUsage[];

// One member per daemon flag (--cache-max-bytes is cache_max_bytes); the member defaults are the
// flags' defaults. Values with a syntax of their own stay text until BuildAgentOptions.
struct AgentFlags {
  std::string server;  // HOST:PORT, required
  std::string join_token;
  std::string join_token_file;
  std::string credential_file;  // empty: <cache_dir>/worker-<name>.credential
  std::string name;             // empty: the host name (ResolveAgentOptions)
  int slots = 0;                // 0 = one per device: 1 with cpu, the number of GPUs with gpu
  std::string device = "cpu";   // cpu | gpu:ID[,ID...]
  int threads = 1;
  std::string labels;  // k=v,k=v
  std::string cache_dir = "./gantry-cache";
  std::string cache_max_bytes = "10G";  // N[K|M|G|T]
  std::string advertise_host = "127.0.0.1";
  std::string rendezvous_ports = "29400-29499";  // MIN-MAX
  std::string work_dir;                          // empty: <cache_dir>/work
  std::string file_roots;                        // dir,dir: where file:// datasets may be read
  std::string ranks_die_with_daemon = "true";    // true | false
  int serve_port = 0;
  // Serve generation without TLS on a --advertise-host that is not loopback (a private network
  // only); refused otherwise, since the router's secret would travel in clear.
  bool serve_plaintext = false;
  int max_batch_size = 128;
  double max_queue_delay_ms = 2.0;
  int max_queued_requests = 1024;
  std::string model_cache_bytes = "1G";  // N[K|M|G|T]
  int serve_threads = 0;
  std::string rank_binary;             // hidden: tests run a fake rank program
  int kill_grace_ms = 5000;            // hidden
  int preemption_grace_ms = 25000;     // SIGTERM: ranks checkpoint within this; 0 = stop at once
  int collective_timeout_ms = 120000;  // Gloo timeout of assignments that leave it 0
  std::string idle_exit_after;         // "" = never; 300s, 5m, 1h or plain seconds
  std::string ca_cert;                 // PEM CA bundle: TLS to gantry-server when given
  std::string tls_cert;  // PEM certificate (mutual TLS, generation endpoint); needs --ca-cert
  std::string tls_key;   // PEM private key of --tls-cert
};

// INVALID_ARGUMENT with a message naming the offending flag for bad numbers or ranges, a missing
// --server or join token, and --device gpu in a build without GANTRY_WITH_CUDA. A GPU worker
// offers one slot per GPU: --slots defaults to the number of GPU ids and may not exceed it. Leaves
// name empty when --name is absent (the caller fills in the host name) and work_dir empty when
// --work-dir is absent (= <cache_dir>/work).
absl::StatusOr<AgentOptions> BuildAgentOptions(const AgentFlags& flags);
// The same as in a build with (cuda_build) or without GANTRY_WITH_CUDA, so the GPU rules are
// tested in CPU-only builds too.
absl::StatusOr<AgentOptions> BuildAgentOptions(const AgentFlags& flags, bool cuda_build);

// Fills the defaults that need the environment: join_token from join_token_file (trimmed), the
// TLS files made absolute and loaded (LoadTlsConfig),
// name from the host name, cache_dir/work_dir made absolute and work_dir defaulted. Creates
// cache_dir and work_dir. Defaults credential_file and loads the credential a previous run kept
// there into `credential`. INVALID_ARGUMENT naming the flag when a file or directory fails.
absl::Status ResolveAgentOptions(AgentOptions* options);

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_AGENT_FLAGS_H_
