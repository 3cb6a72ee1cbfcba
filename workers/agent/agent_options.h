// AgentOptions: everything the worker daemon (gantry-worker daemon) is configured with; filled
// from the daemon flags by BuildAgentOptions (agent_flags.h) and passed down to WorkerAgent and
// RankLauncher.
#ifndef GANTRY_WORKERS_AGENT_AGENT_OPTIONS_H_
#define GANTRY_WORKERS_AGENT_AGENT_OPTIONS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/file_roots.h"
#include "base/tls_config.h"
#include "gantry/v1/common.pb.h"
#include "workers/agent/credential_slot.h"

namespace gantry::agent {

struct AgentOptions {
  std::string server;           // host:port of gantry-server
  std::string join_token;       // the worker join token (never put on a child's argv)
  std::string join_token_file;  // read into join_token by LoadJoinToken when join_token is empty
  // The worker credential Register returns (shared by every copy of these options; the join
  // token is used only to register).
  std::shared_ptr<CredentialSlot> credential = std::make_shared<CredentialSlot>();
  // Where the credential is kept between runs (mode 0600), so a restarted daemon shows it and
  // keeps its name and id; empty = not kept (tests of the agent alone).
  std::string credential_file;
  std::string name;  // unique per pool; empty = the host name
  int slots = 1;     // ranks hosted at once; with GPUs at most device_ids.size()
  gantry::v1::DeviceKind device = gantry::v1::DEVICE_KIND_CPU;
  // GPU ids with DEVICE_KIND_GPU, distinct: each rank runs on one of them, never two on one.
  std::vector<int> device_ids;
  int threads_per_rank = 1;
  std::map<std::string, std::string> labels;
  std::string cache_dir = "./gantry-cache";
  int64_t cache_max_bytes = int64_t{10} << 30;  // the dataset cache's size limit
  std::string advertise_host = "127.0.0.1";
  int rendezvous_port_min = 29400;
  int rendezvous_port_max = 29499;
  std::string work_dir;  // per-rank scratch root; empty = <cache_dir>/work
  // The only directories "file://" datasets may be read from on this worker (an operator's
  // allowlist, per pool); none = file:// is refused. Must not overlap cache_dir or work_dir.
  FileRoots file_roots;
  // The program run for each rank as `<rank_binary> rank --assignment=...`; empty = this
  // executable (/proc/self/exe). Tests point it at a fake rank.
  std::string rank_binary;
  // Extra arguments for every rank (the daemon's --log-format and --log-level, so its ranks log
  // alike).
  std::vector<std::string> rank_log_args;
  // Ranks are SIGKILLed by the kernel when the daemon dies (even by kill -9), so a dead daemon
  // never leaves ranks holding CPUs or GPUs that nobody reports. On by default; off lets ranks run
  // on until they finish or fail on their own.
  bool ranks_die_with_daemon = true;
  // Grace between SIGTERM and SIGKILL when stopping a rank.
  int kill_grace_ms = 5000;
  // A preemption notice (SIGTERM to the daemon) gives ranks this long to checkpoint and exit
  // (SIGUSR1) before they are stopped; 0 = stop them at once, as SIGINT does.
  int preemption_grace_ms = 25000;
  // Gloo collective and rendezvous timeout written into assignments that leave it 0.
  int collective_timeout_ms = 120000;
  // The daemon exits (code 0) after this long without a running rank (a Slurm pilot frees its
  // allocation); zero = never.
  absl::Duration idle_exit_after = absl::ZeroDuration();

  // Generation serving (workers/serving): WorkerGenerationService on advertise_host:serve_port.
  int serve_port = 0;                            // 0 = an ephemeral port; -1 = serving off
  int max_batch_size = 128;                      // showers per generator batch
  double max_queue_delay_ms = 2.0;               // wait at most this long for a batch to fill
  int max_queued_requests = 1024;                // per model; beyond: RESOURCE_EXHAUSTED
  int64_t model_cache_bytes = int64_t{1} << 30;  // loaded generators' parameters and buffers
  int serve_threads = 0;                         // intra-op threads for generation; 0 = all cores

  // TLS: --ca-cert (the CA of gantry-server's certificate; TLS on when given), --tls-cert and
  // --tls-key (this worker's certificate: the client certificate for mutual TLS, and the server
  // certificate of its generation endpoint). Paths in tls_files (absolute after
  // ResolveAgentOptions, which loads them into tls); ranks get the paths.
  TlsFiles tls_files;
  TlsConfig tls;
};

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_AGENT_OPTIONS_H_
