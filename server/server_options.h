// ServerOptions: everything gantry-server is configured with (filled from flags in main.cc only).
#ifndef GANTRY_SERVER_SERVER_OPTIONS_H_
#define GANTRY_SERVER_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "server/sandboxed_inspector.h"

namespace gantry::server {

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";  // host:port; port 0 picks a free one
  std::string db_dsn;                      // libpq DSN
  std::string data_dir;                    // blob store root
  std::string tls_cert_file;               // PEM; TLS only when both cert and key are given
  std::string tls_key_file;
  std::string admin_token_file;  // bootstrap: tenant "admin" gets this token
  std::string join_token_file;   // bootstrap: a worker join token
  int db_pool_size = 16;
  // How long connecting to PostgreSQL, and one statement, may take before the call gives up with
  // UNAVAILABLE (a tick or an RPC then fails fast instead of blocking a thread).
  absl::Duration db_connect_timeout = absl::Seconds(5);
  absl::Duration db_statement_timeout = absl::Seconds(10);
  int64_t max_dataset_bytes = int64_t{64} << 30;    // 64 GiB
  int64_t max_checkpoint_bytes = int64_t{4} << 30;  // 4 GiB
  int max_message_bytes = 16 << 20;                 // gRPC max send/receive message size
  absl::Duration watch_poll_interval = absl::Milliseconds(200);
  absl::Duration shutdown_grace = absl::Seconds(5);
  int heartbeat_interval_ms = 2000;
  int lease_timeout_ms = 15000;
  // Job coordinator: how often it schedules; how long a job may stay PLACING before its ranks all
  // run (dataset download, rendezvous); how long ranks of an ended job get to exit before their
  // slots are released anyway; the least time between two progress events of a job.
  absl::Duration scheduler_tick = absl::Milliseconds(200);
  absl::Duration placing_timeout = absl::Minutes(10);
  absl::Duration rank_exit_grace = absl::Seconds(30);
  absl::Duration progress_event_interval = absl::Seconds(1);
  // Fault tolerance. The progress watchdog restarts a RUNNING job (reason NoProgress) when rank 0
  // reports no new step for max(hang_timeout, hang_step_factor x the median step time). Ranks get
  // collective_timeout_ms as their Gloo timeout (0 = the worker's default).
  absl::Duration hang_timeout = absl::Minutes(5);
  double hang_step_factor = 20;
  int collective_timeout_ms = 0;
  // Generation: the largest count one Generate call may ask for (RESOURCE_EXHAUSTED above it).
  int64_t max_showers_per_request = 1000000;
  // How long a verified tenant token and a resolved model reference are reused without asking
  // PostgreSQL again (0 = never). Changes made through this server (RevokeToken, SetAlias,
  // DeleteAlias, ArchiveModel) clear the caches at once; changes made elsewhere (another server,
  // SQL) are seen within this time.
  absl::Duration auth_cache_ttl = absl::Seconds(2);
  absl::Duration model_cache_ttl = absl::Seconds(2);
  // How uploaded files are inspected (a sandboxed gantry-inspect child per upload).
  InspectorOptions inspector;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_SERVER_OPTIONS_H_
