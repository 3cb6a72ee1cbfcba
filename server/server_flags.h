// ServerFlags: the flag values of gantry-server as given on the command line, and
// BuildServerOptions, which validates them into ServerOptions (pure), so every value error is
// unit-testable; ResolveServerOptions then does what needs the environment and the file system.
// main.cc declares the flags (their defaults are ServerFlags's) and only reads them and starts.
#ifndef GANTRY_SERVER_SERVER_FLAGS_H_
#define GANTRY_SERVER_SERVER_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/sanitizers.h"
#include "server/platform/server_options.h"
#include "storage/tenant_limits.h"

namespace gantry::server {

// One member per flag (--http-session-hours is http_session_hours); the member defaults are the
// flags' defaults. Durations stay in the flags' units until BuildServerOptions.
struct ServerFlags {
  std::string listen = "127.0.0.1:50051";
  std::string worker_listen;
  std::string metrics_listen;
  std::string http_listen;
  std::string web_root;  // empty: <build>/web next to the binary (ResolveServerOptions)
  int http_session_hours = 12;
  int64_t http_max_generate_showers = 2000;
  int http_max_event_streams = 8;
  int http_max_event_streams_per_tenant = 2;
  int http_max_connections = 512;
  int http_max_connections_per_ip = 64;
  std::string db;
  std::string db_file;
  std::string data_dir = "var/data";
  std::string rank_key_file;
  std::string tls_cert;
  std::string tls_key;
  bool reflection = false;
  std::string tls_client_ca;
  std::string worker_tls_name;
  std::string admin_token_file;
  std::string join_token_file;
  int64_t max_dataset_bytes = int64_t{64} << 30;
  int shutdown_grace_seconds = 5;
  int health_check_interval_ms = 3000;
  int heartbeat_interval_ms = 2000;
  int lease_timeout_ms = 15000;
  int rank_exit_grace_seconds = 30;
  int hang_timeout_seconds = 300;
  double hang_step_factor = 20;
  int autoscale_interval_ms = 2000;
  int pool_idle_timeout_seconds = 60;
  int pool_join_timeout_seconds = 600;
  int pool_backoff_seconds = 10;
  int budget_refresh_ms = 5000;
  int collective_timeout_ms = 0;
  int placing_timeout_seconds = 600;
  int db_connect_timeout_ms = 5000;
  int db_statement_timeout_ms = 10000;
  int auth_cache_ttl_ms = 2000;
  std::string file_dataset_roots;         // dir,dir
  std::string file_dataset_tenants;       // tenant,tenant or *
  std::string file_dataset_tenant_roots;  // tenant=/dir[,/dir...];...
  int model_cache_ttl_ms = 2000;
  int db_pool_wait_ms = 10000;
  int64_t blob_gc_interval_ms = 600000;
  int64_t blob_gc_grace_ms = 3600000;
  int64_t study_interval_ms = 1000;
  int max_threads = 256;
  // The defaults of the per-tenant limits: safe, not unlimited (storage::TenantLimits).
  int64_t max_showers_per_request = storage::TenantLimits().max_showers_per_request;
  int64_t tenant_max_dataset_bytes = storage::TenantLimits().max_dataset_bytes;
  int64_t tenant_max_concurrent_jobs = storage::TenantLimits().max_concurrent_jobs;
  int64_t tenant_max_generation_streams = storage::TenantLimits().max_generation_streams;
  int64_t tenant_max_showers_per_minute = storage::TenantLimits().max_showers_per_minute;
  int64_t tenant_max_study_jobs = storage::TenantLimits().max_study_jobs;
  int64_t tenant_max_streams = storage::TenantLimits().max_streams;
  int watch_poll_interval_ms = 2000;
  int stream_token_recheck_ms = 1000;
  int stream_header_timeout_ms = 10000;
  int stream_idle_timeout_ms = 60000;
  std::string inspect_binary;  // empty: gantry-inspect next to the binary (ResolveServerOptions)
  int inspect_timeout_ms = 120000;
  int inspect_concurrency = 4;
  // An AddressSanitizer build inspects without an address-space limit (base/sanitizers.h).
  int inspect_memory_mb = kAddressSanitizer ? 0 : 1024;
  double log_sample_rate = 0.01;
  int64_t max_dataset_events = 50000000;
};

// The options the flags say. INVALID_ARGUMENT with a message naming the offending flags and their
// ranges for a malformed address, a value out of range, --web-root without --http-listen, or both
// --db and --db-file. Reads nothing: the database DSN may still be empty (a --db-file or
// $GANTRY_DB), and the web root and the inspection helper may still be their defaults, which
// ResolveServerOptions fills in.
absl::StatusOr<ServerOptions> BuildServerOptions(const ServerFlags& flags);

// Completes `options` from the environment: the DSN from --db-file (a secret file,
// base/secret_file.h) or else $GANTRY_DB when --db is not given; the default web root when the
// HTTP API is on; the default inspection helper, which must be an executable file. INVALID_ARGUMENT
// (or the secret file's error) saying what to give otherwise.
absl::Status ResolveServerOptions(const ServerFlags& flags, ServerOptions* options);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_SERVER_FLAGS_H_
