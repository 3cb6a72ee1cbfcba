#include "server/server_flags.h"

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/file_roots.h"
#include "base/http/listen_address.h"
#include "base/secret_file.h"
#include "base/status_macros.h"
#include "server/http/http_api_server.h"
#include "showers/sandboxed_inspector.h"

namespace gantry::server {
namespace {

absl::Status Bad(absl::string_view message) { return absl::InvalidArgumentError(message); }

// The listener settings: addresses, the HTTP API's caps.
absl::Status ParseListeners(const ServerFlags& f, ServerOptions* o) {
  o->listen = f.listen;
  o->worker_listen = f.worker_listen;
  o->metrics_listen = f.metrics_listen;
  o->http.listen = f.http_listen;
  for (const auto& [address, flag] : {std::pair{&o->worker_listen, "--worker-listen"},
                                      std::pair{&o->metrics_listen, "--metrics-listen"},
                                      std::pair{&o->http.listen, "--http-listen"}}) {
    if (address->empty()) continue;
    RETURN_IF_ERROR(ParseListenAddress(*address, flag).status());
  }
  if (!o->http.listen.empty()) {
    o->http.web_root = f.web_root;
  } else if (!f.web_root.empty()) {
    return Bad("--web-root needs --http-listen (the address to serve it on)");
  }
  o->http.max_generate_showers = f.http_max_generate_showers;
  o->http.max_event_streams = f.http_max_event_streams;
  o->http.max_event_streams_per_tenant = f.http_max_event_streams_per_tenant;
  if (f.http_session_hours < 1 || f.http_session_hours > 24 * 30 ||
      o->http.max_generate_showers < 1 || o->http.max_event_streams < 1 ||
      o->http.max_event_streams > 12 || o->http.max_event_streams_per_tenant < 1 ||
      o->http.max_event_streams_per_tenant > o->http.max_event_streams) {
    return Bad(
        "--http-session-hours must be 1..720, --http-max-generate-showers >= 1, "
        "--http-max-event-streams 1..12 (the API has 16 handler threads) and "
        "--http-max-event-streams-per-tenant 1..that");
  }
  o->http.max_connections = f.http_max_connections;
  o->http.max_connections_per_ip = f.http_max_connections_per_ip;
  if (o->http.max_connections < 1 || o->http.max_connections > 65536 ||
      o->http.max_connections_per_ip < 1 ||
      o->http.max_connections_per_ip > o->http.max_connections) {
    return Bad("--http-max-connections must be 1..65536 and --http-max-connections-per-ip 1..that");
  }
  o->http.session_ttl = absl::Hours(f.http_session_hours);
  return absl::OkStatus();
}

// Workers, jobs and pools: heartbeats, leases, watchdogs, the autoscaler.
absl::Status ParseCoordination(const ServerFlags& f, ServerOptions* o) {
  o->health_check_interval = absl::Milliseconds(f.health_check_interval_ms);
  if (o->health_check_interval < absl::ZeroDuration() ||
      (o->health_check_interval > absl::ZeroDuration() &&
       o->health_check_interval < absl::Milliseconds(50))) {
    return Bad("--health-check-interval-ms must be 0 (check once) or >= 50");
  }
  o->coordinator.heartbeat_interval_ms = f.heartbeat_interval_ms;
  o->coordinator.lease_timeout_ms = f.lease_timeout_ms;
  o->coordinator.placing_timeout = absl::Seconds(f.placing_timeout_seconds);
  o->coordinator.rank_exit_grace = absl::Seconds(f.rank_exit_grace_seconds);
  o->coordinator.hang_timeout = absl::Seconds(f.hang_timeout_seconds);
  o->coordinator.hang_step_factor = f.hang_step_factor;
  o->pools.autoscale_interval = absl::Milliseconds(f.autoscale_interval_ms);
  o->pools.idle_timeout = absl::Seconds(f.pool_idle_timeout_seconds);
  o->pools.join_timeout = absl::Seconds(f.pool_join_timeout_seconds);
  o->pools.backoff = absl::Seconds(f.pool_backoff_seconds);
  if (o->pools.autoscale_interval < absl::Milliseconds(100) ||
      o->pools.idle_timeout < absl::ZeroDuration() || o->pools.join_timeout < absl::Seconds(1) ||
      o->pools.backoff < absl::Seconds(1)) {
    return Bad(
        "--autoscale-interval-ms must be >= 100, --pool-idle-timeout-seconds >= 0, "
        "--pool-join-timeout-seconds and --pool-backoff-seconds >= 1");
  }
  o->coordinator.budget_refresh = absl::Milliseconds(f.budget_refresh_ms);
  if (o->coordinator.budget_refresh < absl::Milliseconds(100)) {
    return Bad("--budget-refresh-ms must be >= 100");
  }
  o->coordinator.collective_timeout_ms = f.collective_timeout_ms;
  if (o->coordinator.rank_exit_grace < absl::Seconds(1) || o->coordinator.hang_timeout < absl::Seconds(1) ||
      !(o->coordinator.hang_step_factor >= 1) || o->coordinator.collective_timeout_ms < 0) {
    return Bad(
        "--rank-exit-grace-seconds and --hang-timeout-seconds must be >= 1, "
        "--hang-step-factor >= 1 and --collective-timeout-ms >= 0");
  }
  return absl::OkStatus();
}

// file:// datasets: the shared roots, who may use them, each tenant's own.
absl::Status ParseFileDatasets(const ServerFlags& f, ServerOptions* o) {
  ASSIGN_OR_RETURN(o->file_datasets.roots,
                   FileRoots::Parse(f.file_dataset_roots, "file-dataset-roots"));
  for (absl::string_view tenant :
       absl::StrSplit(f.file_dataset_tenants, ',', absl::SkipWhitespace())) {
    o->file_datasets.tenants.insert(std::string(absl::StripAsciiWhitespace(tenant)));
  }
  ASSIGN_OR_RETURN(o->file_datasets.tenant_roots,
                   ParseTenantFileRoots(f.file_dataset_tenant_roots, "file-dataset-tenant-roots"));
  return absl::OkStatus();
}

// What one tenant may hold, and the streams' deadlines.
absl::Status ParseCapacity(const ServerFlags& f, ServerOptions* o) {
  o->db.pool_wait = absl::Milliseconds(f.db_pool_wait_ms);
  o->blob_gc_interval = absl::Milliseconds(f.blob_gc_interval_ms);
  o->blob_gc_grace = absl::Milliseconds(f.blob_gc_grace_ms);
  o->max_threads = f.max_threads;
  storage::TenantLimits& limits = o->default_limits;
  limits.max_dataset_bytes = f.tenant_max_dataset_bytes;
  limits.max_concurrent_jobs = f.tenant_max_concurrent_jobs;
  limits.max_generation_streams = f.tenant_max_generation_streams;
  limits.max_showers_per_minute = f.tenant_max_showers_per_minute;
  limits.max_streams = f.tenant_max_streams;
  limits.max_showers_per_request = f.max_showers_per_request;
  limits.max_study_jobs = f.tenant_max_study_jobs;
  o->streams.header_timeout = absl::Milliseconds(f.stream_header_timeout_ms);
  o->streams.idle_timeout = absl::Milliseconds(f.stream_idle_timeout_ms);
  if (o->streams.header_timeout < absl::Milliseconds(100) ||
      o->streams.idle_timeout < absl::Milliseconds(100)) {
    return Bad("--stream-header-timeout-ms and --stream-idle-timeout-ms must be >= 100");
  }
  o->streams.watch_poll_interval = absl::Milliseconds(f.watch_poll_interval_ms);
  o->coordinator.study_interval = absl::Milliseconds(f.study_interval_ms);
  if (o->coordinator.study_interval < absl::ZeroDuration()) return Bad("--study-interval-ms must be >= 0");
  o->streams.token_recheck = absl::Milliseconds(f.stream_token_recheck_ms);
  if (o->streams.watch_poll_interval < absl::Milliseconds(50) ||
      o->streams.token_recheck < absl::Milliseconds(50)) {
    return Bad("--watch-poll-interval-ms and --stream-token-recheck-ms must be >= 50");
  }
  if (o->db.pool_wait < absl::Milliseconds(1) || o->blob_gc_interval < absl::ZeroDuration() ||
      o->blob_gc_grace < absl::Milliseconds(100) || o->max_threads < 0 ||
      limits.max_dataset_bytes < 0 || limits.max_concurrent_jobs < 0 ||
      limits.max_generation_streams < 0 || limits.max_showers_per_minute < 0 ||
      limits.max_streams < 0 || limits.max_study_jobs < 0 || limits.max_showers_per_request < 0) {
    return Bad(
        "--db-pool-wait-ms must be >= 1, --blob-gc-grace-ms >= 100, --blob-gc-interval-ms, "
        "--max-threads, --tenant-max-* and --max-showers-per-request >= 0");
  }
  if (o->max_threads != 0 && o->max_threads < 8) {
    return Bad("--max-threads must be 0 (no bound) or at least 8");
  }
  return absl::OkStatus();
}

// The sandboxed inspection of uploads (the helper binary itself: ResolveServerOptions).
absl::Status ParseInspector(const ServerFlags& f, ServerOptions* o) {
  showers::InspectorOptions& inspector = o->inspector;
  inspector.binary = f.inspect_binary;
  inspector.timeout = absl::Milliseconds(f.inspect_timeout_ms);
  inspector.max_concurrent = f.inspect_concurrency;
  inspector.limits.address_space_bytes = int64_t{f.inspect_memory_mb} << 20;
  inspector.limits.cpu_seconds = 0;  // follows the timeout
  inspector.file_limits.max_events = f.max_dataset_events;
  if (inspector.timeout < absl::Milliseconds(100) || f.inspect_memory_mb < 0 ||
      inspector.file_limits.max_events < 1 || inspector.max_concurrent < 1 ||
      inspector.max_concurrent > 1024) {
    return Bad(
        "--inspect-timeout-ms must be >= 100, --inspect-memory-mb >= 0, --inspect-concurrency "
        "1-1024 and --max-dataset-events >= 1");
  }
  if (o->coordinator.heartbeat_interval_ms < 100 || o->coordinator.lease_timeout_ms < 2 * o->coordinator.heartbeat_interval_ms) {
    return Bad(
        "--heartbeat-interval-ms must be >= 100 and --lease-timeout-ms at least twice the "
        "heartbeat interval");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerOptions> BuildServerOptions(const ServerFlags& f) {
  ServerOptions o;
  o.log_sample_rate = f.log_sample_rate;
  if (!(o.log_sample_rate >= 0 && o.log_sample_rate <= 1)) {
    return Bad("--log-sample-rate must be between 0 and 1");
  }
  RETURN_IF_ERROR(ParseListeners(f, &o));
  o.db.dsn = f.db;
  if (!f.db_file.empty() && !o.db.dsn.empty())
    return Bad("give either --db or --db-file, not both");
  o.data_dir = f.data_dir;
  o.rank_key_file = f.rank_key_file;
  o.reflection = f.reflection;
  o.tls.cert_file = f.tls_cert;
  o.tls.key_file = f.tls_key;
  o.tls.client_ca_file = f.tls_client_ca;
  o.tls.worker_name = f.worker_tls_name;
  o.admin_token_file = f.admin_token_file;
  o.join_token_file = f.join_token_file;
  o.max_dataset_bytes = f.max_dataset_bytes;
  o.shutdown_grace = absl::Seconds(f.shutdown_grace_seconds);
  RETURN_IF_ERROR(ParseCoordination(f, &o));
  o.auth_cache_ttl = absl::Milliseconds(f.auth_cache_ttl_ms);
  o.db.connect_timeout = absl::Milliseconds(f.db_connect_timeout_ms);
  o.db.statement_timeout = absl::Milliseconds(f.db_statement_timeout_ms);
  if (o.db.connect_timeout <= absl::ZeroDuration() ||
      o.db.statement_timeout < absl::ZeroDuration()) {
    return Bad("--db-connect-timeout-ms must be > 0 and --db-statement-timeout-ms >= 0");
  }
  o.model_cache_ttl = absl::Milliseconds(f.model_cache_ttl_ms);
  RETURN_IF_ERROR(ParseFileDatasets(f, &o));
  RETURN_IF_ERROR(ParseCapacity(f, &o));
  RETURN_IF_ERROR(ParseInspector(f, &o));
  return o;
}

absl::Status ResolveServerOptions(const ServerFlags& f, ServerOptions* o) {
  if (!f.db_file.empty()) {
    ASSIGN_OR_RETURN(o->db.dsn, ReadSecretFile(f.db_file, "--db-file", "the libpq DSN"));
  }
  if (const char* env = std::getenv("GANTRY_DB"); o->db.dsn.empty() && env != nullptr) {
    o->db.dsn = env;
  }
  if (o->db.dsn.empty()) {
    return Bad(
        "no database: give --db=DSN or set GANTRY_DB (deploy/local/pg.sh start prints the DSN of "
        "a private PostgreSQL)");
  }
  if (!o->http.listen.empty() && o->http.web_root.empty()) o->http.web_root = http::DefaultWebRoot();
  if (o->inspector.binary.empty()) o->inspector.binary = showers::DefaultInspectBinary();
  if (access(o->inspector.binary.c_str(), X_OK) != 0) {
    return Bad(absl::StrCat("the upload inspection helper ", o->inspector.binary,
                            " is not an executable file; build gantry-inspect or set "
                            "--inspect-binary"));
  }
  return absl::OkStatus();
}

}  // namespace gantry::server
