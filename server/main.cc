// gantry-server: the front server. Its flags are declared here and read into ServerFlags;
// server_flags.h turns them into ServerOptions.
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "base/build_info.h"
#include "base/flags.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/private_directory.h"
#include "base/signals.h"
#include "server/gantry_server.h"
#include "server/platform/server_options.h"
#include "server/server_flags.h"

namespace {
const gantry::server::ServerFlags kDefaults;  // the flags' defaults
}  // namespace

ABSL_FLAG(
    std::string, listen, kDefaults.listen,
    "host:port to serve on; port 0 picks a free port (printed as \"listening on HOST:PORT\")");
ABSL_FLAG(std::string, worker_listen, kDefaults.worker_listen,
          "host:port of a second gRPC listener for the worker protocol only (WorkerService, "
          "DatasetService.ReadDataset, grpc.health.v1; same TLS as --listen), so a network policy "
          "can admit only workers to it; --listen then serves tenants only. Default empty: "
          "workers use --listen");
ABSL_FLAG(std::string, metrics_listen, kDefaults.metrics_listen,
          "host:port of the Prometheus /metrics endpoint (plain HTTP; default empty: off)");
ABSL_FLAG(std::string, http_listen, kDefaults.http_listen,
          "host:port of the HTTP API and web app (HTTPS with --tls-cert/--tls-key); empty = off");
ABSL_FLAG(std::string, web_root, kDefaults.web_root,
          "folder of the built web app served by --http-listen (default: <build>/web next to "
          "this binary, when it exists)");
ABSL_FLAG(int, http_session_hours, kDefaults.http_session_hours,
          "how long a browser session of the HTTP API lasts");
ABSL_FLAG(int64_t, http_max_generate_showers, kDefaults.http_max_generate_showers,
          "most showers one HTTP download (POST /api/v1/generate) may ask for");
ABSL_FLAG(int, http_max_event_streams, kDefaults.http_max_event_streams,
          "job event streams (Server-Sent Events) the HTTP API serves at once; each holds a "
          "handler thread");
ABSL_FLAG(int, http_max_event_streams_per_tenant, kDefaults.http_max_event_streams_per_tenant,
          "job event streams one tenant may hold at once (at most --http-max-event-streams)");
ABSL_FLAG(int, http_max_connections, kDefaults.http_max_connections,
          "connections the HTTP API holds open at once (1..65536); a connection costs a 32 KiB "
          "buffer and no thread until its request has arrived");
ABSL_FLAG(int, http_max_connections_per_ip, kDefaults.http_max_connections_per_ip,
          "connections one client address may hold open (1..--http-max-connections; raise it "
          "behind a reverse proxy, whose address every client shares)");
ABSL_FLAG(std::string, db, kDefaults.db,
          "libpq DSN of the PostgreSQL database (default: $GANTRY_DB; one of them or --db-file is "
          "required)");
ABSL_FLAG(std::string, db_file, kDefaults.db_file,
          "file holding the libpq DSN (keeps a password out of the process list; a container "
          "secret); not with --db");
ABSL_FLAG(std::string, data_dir, kDefaults.data_dir,
          "directory of the blob store (datasets, checkpoints), relative to the working directory "
          "unless absolute");
ABSL_FLAG(std::string, rank_key_file, kDefaults.rank_key_file,
          "file of the key that signs rank credentials (64 hex characters, mode 0600; made when "
          "missing; every server on one database needs the same one). Default: "
          "<data-dir>/rank-credentials.key");
ABSL_FLAG(std::string, tls_cert, kDefaults.tls_cert,
          "PEM certificate chain; TLS is on when --tls-cert and --tls-key "
          "are given");
ABSL_FLAG(std::string, tls_key, kDefaults.tls_key, "PEM private key for --tls-cert");
ABSL_FLAG(bool, reflection, kDefaults.reflection,
          "serve gRPC server reflection (for grpcurl), to callers with a valid tenant or admin "
          "token only; off by default");
ABSL_FLAG(std::string, tls_client_ca, kDefaults.tls_client_ca,
          "PEM CA bundle of worker certificates (needs --tls-cert): worker calls must present a "
          "client certificate signed by it (mutual TLS; tenants need none), and workers' "
          "generation endpoints are dialled over TLS and verified against it");
ABSL_FLAG(std::string, worker_tls_name, kDefaults.worker_tls_name,
          "with --tls-client-ca: the name (DNS SAN) worker endpoints' certificates carry, checked "
          "instead of each worker's --advertise-host (one certificate shared by workers whose "
          "addresses are not known in advance, e.g. Kubernetes pods)");
ABSL_FLAG(std::string, admin_token_file, kDefaults.admin_token_file,
          "file holding a token for the admin tenant \"admin\" (created when missing)");
ABSL_FLAG(std::string, join_token_file, kDefaults.join_token_file,
          "file holding a worker join token to accept");
ABSL_FLAG(int64_t, max_dataset_bytes, kDefaults.max_dataset_bytes,
          "largest dataset upload accepted");
ABSL_FLAG(int, shutdown_grace_seconds, kDefaults.shutdown_grace_seconds,
          "seconds calls get to finish on SIGINT/SIGTERM");
ABSL_FLAG(int, health_check_interval_ms, kDefaults.health_check_interval_ms,
          "how often grpc.health.v1 statuses are brought up to date: PostgreSQL probed (services "
          "that need it NOT_SERVING while it is unreachable), serving workers counted "
          "(GenerationService); 0 = only once at start");
ABSL_FLAG(int, heartbeat_interval_ms, kDefaults.heartbeat_interval_ms,
          "how often workers are told to heartbeat");
ABSL_FLAG(int, lease_timeout_ms, kDefaults.lease_timeout_ms,
          "a worker silent for longer is lost and the jobs with ranks on it restart (or fail)");
ABSL_FLAG(int, rank_exit_grace_seconds, kDefaults.rank_exit_grace_seconds,
          "how long the ranks of an ended or restarting job get to exit before their slots are "
          "released anyway");
ABSL_FLAG(int, hang_timeout_seconds, kDefaults.hang_timeout_seconds,
          "the progress watchdog restarts a running job when rank 0 reports no new step for "
          "max(this, --hang-step-factor x the median step time)");
ABSL_FLAG(double, hang_step_factor, kDefaults.hang_step_factor, "see --hang-timeout-seconds");
ABSL_FLAG(int, autoscale_interval_ms, kDefaults.autoscale_interval_ms,
          "how often the pool autoscaler plans (docs/POOLS.md)");
ABSL_FLAG(int, pool_idle_timeout_seconds, kDefaults.pool_idle_timeout_seconds,
          "an elastic pool's worker idle this long (no ranks) is removed, down to min_workers");
ABSL_FLAG(int, pool_join_timeout_seconds, kDefaults.pool_join_timeout_seconds,
          "provisioned workers that have not joined after this no longer count as pending");
ABSL_FLAG(int, pool_backoff_seconds, kDefaults.pool_backoff_seconds,
          "after a provisioner failure no scale-up for this long, doubling per failure (to 32x)");
ABSL_FLAG(int, budget_refresh_ms, kDefaults.budget_refresh_ms,
          "how old the scheduler's cache of each tenant's monthly spend may get (budgets)");
ABSL_FLAG(int, collective_timeout_ms, kDefaults.collective_timeout_ms,
          "Gloo collective timeout given to ranks (0 = the worker's default)");
ABSL_FLAG(int, placing_timeout_seconds, kDefaults.placing_timeout_seconds,
          "a job whose ranks have not all started after this long fails (dataset download and "
          "rendezvous included)");
ABSL_FLAG(
    int64_t, max_showers_per_request, kDefaults.max_showers_per_request,
    "default per-tenant limit on the showers one Generate call may ask for (more is "
    "RESOURCE_EXHAUSTED; 0 = unlimited; AdminService.SetTenantLimits overrides it per tenant: "
    "max_showers_per_request)");
ABSL_FLAG(int, db_connect_timeout_ms, kDefaults.db_connect_timeout_ms,
          "how long connecting to PostgreSQL may take before a call fails with UNAVAILABLE "
          "(rounded up to whole seconds, at least 2 s)");
ABSL_FLAG(int, db_statement_timeout_ms, kDefaults.db_statement_timeout_ms,
          "how long one SQL statement may run before a call fails with UNAVAILABLE (0 = no limit)");
ABSL_FLAG(int, auth_cache_ttl_ms, kDefaults.auth_cache_ttl_ms,
          "how long a verified tenant token is reused without asking PostgreSQL (0 = never); "
          "revocations through this server apply at once");
ABSL_FLAG(std::string, file_dataset_roots, kDefaults.file_dataset_roots,
          "comma-separated directories jobs may name with file:// datasets (default none: file:// "
          "is refused); workers enforce their own --file-roots on their file system");
ABSL_FLAG(std::string, file_dataset_tenants, kDefaults.file_dataset_tenants,
          "comma-separated tenants allowed to use file:// datasets, or * for every tenant "
          "(default none)");
ABSL_FLAG(std::string, file_dataset_tenant_roots, kDefaults.file_dataset_tenant_roots,
          "directories of a tenant's own for file:// datasets, besides the shared ones: "
          "tenant=/dir[,/dir...] entries separated by ';' (default none)");
ABSL_FLAG(int, model_cache_ttl_ms, kDefaults.model_cache_ttl_ms,
          "how long Generate reuses a resolved model reference (0 = never); alias and archive "
          "changes through this server apply at once");
ABSL_FLAG(int, db_pool_wait_ms, kDefaults.db_pool_wait_ms,
          "how long a call waits for a free database connection before it fails with "
          "UNAVAILABLE");
ABSL_FLAG(int64_t, blob_gc_interval_ms, kDefaults.blob_gc_interval_ms,
          "how often unreferenced blobs are garbage-collected (0 = never)");
ABSL_FLAG(int64_t, blob_gc_grace_ms, kDefaults.blob_gc_grace_ms,
          "a blob is deleted only after nothing has used it for this long (at least 100; keep it "
          "well above the slowest upload's inspection)");
ABSL_FLAG(int64_t, study_interval_ms, kDefaults.study_interval_ms,
          "how often the study driver advances running studies: collects trial results, stops "
          "poor trials and submits new ones (0 = never)");
ABSL_FLAG(int, max_threads, kDefaults.max_threads,
          "the most threads gRPC may use to serve calls, per listener (a grpc::ResourceQuota; "
          "with --worker-listen the workers' listener has a budget of its own; WatchJob and "
          "WatchStudy streams take none while they wait; 0 = no bound)");
// The --tenant-max-* flags (and --max-showers-per-request) are the defaults of the per-tenant
// limits; AdminService.SetTenantLimits overrides each per tenant. Their own defaults are safe, not
// unlimited (storage::TenantLimits).
ABSL_FLAG(int64_t, tenant_max_dataset_bytes, kDefaults.tenant_max_dataset_bytes,
          "default per-tenant limit on stored dataset bytes (0 = unlimited; AdminService."
          "SetTenantLimits overrides it per tenant)");
ABSL_FLAG(int64_t, tenant_max_concurrent_jobs, kDefaults.tenant_max_concurrent_jobs,
          "default per-tenant limit on jobs QUEUED, PLACING, RUNNING or RESTARTING (0 = "
          "unlimited)");
ABSL_FLAG(int64_t, tenant_max_generation_streams, kDefaults.tenant_max_generation_streams,
          "default per-tenant limit on concurrent Generate calls on this server (0 = unlimited)");
ABSL_FLAG(int64_t, tenant_max_showers_per_minute, kDefaults.tenant_max_showers_per_minute,
          "default per-tenant rate of generated showers, a token bucket holding one minute's worth "
          "(0 = unlimited)");
ABSL_FLAG(int64_t, tenant_max_study_jobs, kDefaults.tenant_max_study_jobs,
          "default per-tenant limit on the training jobs one study may run, "
          "spec.budget.max_trials x spec.folds (0 = unlimited)");
ABSL_FLAG(int, watch_poll_interval_ms, kDefaults.watch_poll_interval_ms,
          "WatchJob re-reads a job at once when this server changes it, and otherwise this often "
          "(changes made by another server)");
ABSL_FLAG(int, stream_token_recheck_ms, kDefaults.stream_token_recheck_ms,
          "how often long-lived streams check their token again (a revoked token ends them with "
          "UNAUTHENTICATED)");
ABSL_FLAG(int64_t, tenant_max_streams, kDefaults.tenant_max_streams,
          "default per-tenant limit on concurrent long-lived calls (WatchJob, WatchStudy, "
          "ReadDataset, UploadDataset, Generate, ExportModel) on this server (0 = unlimited)");
ABSL_FLAG(int, stream_header_timeout_ms, kDefaults.stream_header_timeout_ms,
          "a client stream (UploadDataset) whose header has not arrived this long after it opened "
          "ends with DEADLINE_EXCEEDED, freeing its slot and thread");
ABSL_FLAG(int, stream_idle_timeout_ms, kDefaults.stream_idle_timeout_ms,
          "a client stream (UploadDataset) that sends nothing for this long ends with "
          "DEADLINE_EXCEEDED, freeing its slot and thread");

ABSL_FLAG(std::string, inspect_binary, kDefaults.inspect_binary,
          "the upload inspection helper run sandboxed per upload (default: gantry-inspect next to "
          "this binary)");
ABSL_FLAG(int, inspect_timeout_ms, kDefaults.inspect_timeout_ms,
          "wall-clock limit of one upload's inspection");
ABSL_FLAG(int, inspect_concurrency, kDefaults.inspect_concurrency,
          "inspections that run at once, server-wide; another upload waits up to 30 s for one to "
          "end, then is UNAVAILABLE");
// An AddressSanitizer build inspects without an address-space limit (base/sanitizers.h).
ABSL_FLAG(int, inspect_memory_mb, kDefaults.inspect_memory_mb,
          "address-space limit of the inspection child (0 = none, e.g. under AddressSanitizer)");
ABSL_FLAG(double, log_sample_rate, kDefaults.log_sample_rate,
          "share of successful RPCs logged (one line each: method, tenant, code, duration, "
          "request id); failed RPCs are always logged. 0 = none, 1 = all");
ABSL_FLAG(int64_t, max_dataset_events, kDefaults.max_dataset_events,
          "most events accepted in one uploaded file");

// The flags as given.
gantry::server::ServerFlags FlagValues() {
  gantry::server::ServerFlags f;
  f.listen = absl::GetFlag(FLAGS_listen);
  f.worker_listen = absl::GetFlag(FLAGS_worker_listen);
  f.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  f.http_listen = absl::GetFlag(FLAGS_http_listen);
  f.web_root = absl::GetFlag(FLAGS_web_root);
  f.http_session_hours = absl::GetFlag(FLAGS_http_session_hours);
  f.http_max_generate_showers = absl::GetFlag(FLAGS_http_max_generate_showers);
  f.http_max_event_streams = absl::GetFlag(FLAGS_http_max_event_streams);
  f.http_max_event_streams_per_tenant = absl::GetFlag(FLAGS_http_max_event_streams_per_tenant);
  f.http_max_connections = absl::GetFlag(FLAGS_http_max_connections);
  f.http_max_connections_per_ip = absl::GetFlag(FLAGS_http_max_connections_per_ip);
  f.db = absl::GetFlag(FLAGS_db);
  f.db_file = absl::GetFlag(FLAGS_db_file);
  f.data_dir = absl::GetFlag(FLAGS_data_dir);
  f.rank_key_file = absl::GetFlag(FLAGS_rank_key_file);
  f.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  f.tls_key = absl::GetFlag(FLAGS_tls_key);
  f.reflection = absl::GetFlag(FLAGS_reflection);
  f.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  f.worker_tls_name = absl::GetFlag(FLAGS_worker_tls_name);
  f.admin_token_file = absl::GetFlag(FLAGS_admin_token_file);
  f.join_token_file = absl::GetFlag(FLAGS_join_token_file);
  f.max_dataset_bytes = absl::GetFlag(FLAGS_max_dataset_bytes);
  f.shutdown_grace_seconds = absl::GetFlag(FLAGS_shutdown_grace_seconds);
  f.health_check_interval_ms = absl::GetFlag(FLAGS_health_check_interval_ms);
  f.heartbeat_interval_ms = absl::GetFlag(FLAGS_heartbeat_interval_ms);
  f.lease_timeout_ms = absl::GetFlag(FLAGS_lease_timeout_ms);
  f.rank_exit_grace_seconds = absl::GetFlag(FLAGS_rank_exit_grace_seconds);
  f.hang_timeout_seconds = absl::GetFlag(FLAGS_hang_timeout_seconds);
  f.hang_step_factor = absl::GetFlag(FLAGS_hang_step_factor);
  f.autoscale_interval_ms = absl::GetFlag(FLAGS_autoscale_interval_ms);
  f.pool_idle_timeout_seconds = absl::GetFlag(FLAGS_pool_idle_timeout_seconds);
  f.pool_join_timeout_seconds = absl::GetFlag(FLAGS_pool_join_timeout_seconds);
  f.pool_backoff_seconds = absl::GetFlag(FLAGS_pool_backoff_seconds);
  f.budget_refresh_ms = absl::GetFlag(FLAGS_budget_refresh_ms);
  f.collective_timeout_ms = absl::GetFlag(FLAGS_collective_timeout_ms);
  f.placing_timeout_seconds = absl::GetFlag(FLAGS_placing_timeout_seconds);
  f.max_showers_per_request = absl::GetFlag(FLAGS_max_showers_per_request);
  f.db_connect_timeout_ms = absl::GetFlag(FLAGS_db_connect_timeout_ms);
  f.db_statement_timeout_ms = absl::GetFlag(FLAGS_db_statement_timeout_ms);
  f.auth_cache_ttl_ms = absl::GetFlag(FLAGS_auth_cache_ttl_ms);
  f.file_dataset_roots = absl::GetFlag(FLAGS_file_dataset_roots);
  f.file_dataset_tenants = absl::GetFlag(FLAGS_file_dataset_tenants);
  f.file_dataset_tenant_roots = absl::GetFlag(FLAGS_file_dataset_tenant_roots);
  f.model_cache_ttl_ms = absl::GetFlag(FLAGS_model_cache_ttl_ms);
  f.db_pool_wait_ms = absl::GetFlag(FLAGS_db_pool_wait_ms);
  f.blob_gc_interval_ms = absl::GetFlag(FLAGS_blob_gc_interval_ms);
  f.blob_gc_grace_ms = absl::GetFlag(FLAGS_blob_gc_grace_ms);
  f.study_interval_ms = absl::GetFlag(FLAGS_study_interval_ms);
  f.max_threads = absl::GetFlag(FLAGS_max_threads);
  f.tenant_max_dataset_bytes = absl::GetFlag(FLAGS_tenant_max_dataset_bytes);
  f.tenant_max_concurrent_jobs = absl::GetFlag(FLAGS_tenant_max_concurrent_jobs);
  f.tenant_max_generation_streams = absl::GetFlag(FLAGS_tenant_max_generation_streams);
  f.tenant_max_showers_per_minute = absl::GetFlag(FLAGS_tenant_max_showers_per_minute);
  f.tenant_max_study_jobs = absl::GetFlag(FLAGS_tenant_max_study_jobs);
  f.watch_poll_interval_ms = absl::GetFlag(FLAGS_watch_poll_interval_ms);
  f.stream_token_recheck_ms = absl::GetFlag(FLAGS_stream_token_recheck_ms);
  f.tenant_max_streams = absl::GetFlag(FLAGS_tenant_max_streams);
  f.stream_header_timeout_ms = absl::GetFlag(FLAGS_stream_header_timeout_ms);
  f.stream_idle_timeout_ms = absl::GetFlag(FLAGS_stream_idle_timeout_ms);
  f.inspect_binary = absl::GetFlag(FLAGS_inspect_binary);
  f.inspect_timeout_ms = absl::GetFlag(FLAGS_inspect_timeout_ms);
  f.inspect_concurrency = absl::GetFlag(FLAGS_inspect_concurrency);
  f.inspect_memory_mb = absl::GetFlag(FLAGS_inspect_memory_mb);
  f.log_sample_rate = absl::GetFlag(FLAGS_log_sample_rate);
  f.max_dataset_events = absl::GetFlag(FLAGS_max_dataset_events);
  return f;
}

int main(int argc, char** argv) {
  const std::vector<std::string> positional = gantry::ParseFlags(
      argc, argv,
      "gantry-server: the gantry gRPC front server. Flags may be spelled with dashes or "
      "underscores (--data-dir = --data_dir).");
  if (!positional.empty()) {
    std::cerr << "gantry-server: unexpected argument \"" << positional.front()
              << "\"; every setting is a --flag (see --help)\n";
    return 2;
  }
  absl::StatusOr<gantry::LogOptions> log_options = gantry::LogOptionsFromFlags("gantry-server");
  if (!log_options.ok()) {
    std::cerr << "gantry-server: " << log_options.status().message() << "\n";
    return 2;
  }
  gantry::InitLogging(*log_options);

  const gantry::server::ServerFlags flags = FlagValues();
  absl::StatusOr<gantry::server::ServerOptions> built = gantry::server::BuildServerOptions(flags);
  const absl::Status resolved =
      built.ok() ? gantry::server::ResolveServerOptions(flags, &*built) : built.status();
  if (!resolved.ok()) {
    std::cerr << "gantry-server: " << resolved.message() << "\n";
    return 2;
  }
  const gantry::server::ServerOptions& options = *built;

  // The data directory (blobs, the rank key, downloads) and everything the server writes are its
  // user's alone.
  gantry::UsePrivateUmask();
  absl::StatusOr<std::string> private_data = gantry::MakePrivateDirectory(options.data_dir);
  if (!private_data.ok()) {
    std::cerr << "gantry-server: --data-dir: " << private_data.status().message() << "\n";
    return 2;
  }
  if (!private_data->empty()) {
    GANTRY_LOG(WARNING) << "--data-dir: " << *private_data;
  }

  // Signals are taken synchronously by sigwait below; block them before any thread starts.
  const sigset_t signals = gantry::BlockTerminationSignals();

  absl::StatusOr<std::unique_ptr<gantry::server::GantryServer>> server =
      gantry::server::GantryServer::Start(options);
  if (!server.ok()) {
    GANTRY_LOG(ERROR) << "cannot start: " << server.status().message();
    return 1;
  }
  GANTRY_LOG(INFO) << "gantry-server " << gantry::GantryVersionString() << ": "
                   << (*server)->migrations_applied() << " migration(s) applied, data in "
                   << options.data_dir << (options.tls.cert_file.empty() ? "" : ", TLS on")
                   << (options.tls.client_ca_file.empty() ? "" : ", mutual TLS for workers");
  if (!(*server)->metrics_address().empty()) {
    GANTRY_LOG(INFO) << "metrics on http://" << (*server)->metrics_address() << "/metrics";
  }
  if (!(*server)->worker_address().empty()) {
    // Printed before "listening on", which tells scripts and tests the server is up.
    std::cout << "worker protocol on " << (*server)->worker_address() << std::endl;
  }
  if (!(*server)->http_address().empty()) {
    GANTRY_LOG(INFO) << "HTTP API on " << (options.tls.cert_file.empty() ? "http" : "https")
                     << "://" << (*server)->http_address() << "/"
                     << (options.http.web_root.empty() ? " (no web app: --web-root)"
                                                  : ", web app from " + options.http.web_root);
  }
  std::cout << "listening on " << (*server)->address() << std::endl;

  int signal = 0;
  sigwait(&signals, &signal);
  GANTRY_LOG(INFO) << "signal " << signal << ", shutting down";
  (*server)->Shutdown();
  (*server)->Wait();
  server->reset();
  GANTRY_LOG(INFO) << "stopped";
  return 0;
}
