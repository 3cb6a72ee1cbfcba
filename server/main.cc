// gantry-server: the front server. Flags are parsed here only, into ServerOptions.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/build_info.h"
#include "base/file_roots.h"
#include "base/flags.h"
#include "base/http/listen_address.h"
#include "base/log.h"
#include "base/log_flags.h"
#include "base/metrics/metrics_http_server.h"
#include "base/private_directory.h"
#include "base/sanitizers.h"
#include "base/secret_file.h"
#include "base/signals.h"
#include "server/gantry_server.h"
#include "server/secret_file.h"
#include "server/server_options.h"
#include "storage/tenant_limits.h"

namespace {
const gantry::storage::TenantLimits kSafeLimits;  // the defaults of the per-tenant limit flags
}  // namespace

ABSL_FLAG(
    std::string, listen, "127.0.0.1:50051",
    "host:port to serve on; port 0 picks a free port (printed as \"listening on HOST:PORT\")");
ABSL_FLAG(std::string, worker_listen, "",
          "host:port of a second gRPC listener for the worker protocol only (WorkerService, "
          "DatasetService.ReadDataset, grpc.health.v1; same TLS as --listen), so a network policy "
          "can admit only workers to it; --listen then serves tenants only. Default empty: "
          "workers use --listen");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port of the Prometheus /metrics endpoint (plain HTTP; default empty: off)");
ABSL_FLAG(std::string, http_listen, "",
          "host:port of the HTTP API and web app (HTTPS with --tls-cert/--tls-key); empty = off");
ABSL_FLAG(std::string, web_root, "",
          "folder of the built web app served by --http-listen (default: <build>/web next to "
          "this binary, when it exists)");
ABSL_FLAG(int, http_session_hours, 12, "how long a browser session of the HTTP API lasts");
ABSL_FLAG(int64_t, http_max_generate_showers, 2000,
          "most showers one HTTP download (POST /api/v1/generate) may ask for");
ABSL_FLAG(int, http_max_event_streams, 8,
          "job event streams (Server-Sent Events) the HTTP API serves at once; each holds a "
          "handler thread");
ABSL_FLAG(int, http_max_event_streams_per_tenant, 2,
          "job event streams one tenant may hold at once (at most --http-max-event-streams)");
ABSL_FLAG(int, http_max_connections, 512,
          "connections the HTTP API holds open at once (1..65536); a connection costs a 32 KiB "
          "buffer and no thread until its request has arrived");
ABSL_FLAG(int, http_max_connections_per_ip, 64,
          "connections one client address may hold open (1..--http-max-connections; raise it "
          "behind a reverse proxy, whose address every client shares)");
ABSL_FLAG(std::string, db, "",
          "libpq DSN of the PostgreSQL database (default: $GANTRY_DB; one of them or --db-file is "
          "required)");
ABSL_FLAG(std::string, db_file, "",
          "file holding the libpq DSN (keeps a password out of the process list; a container "
          "secret); not with --db");
ABSL_FLAG(std::string, data_dir, "var/data",
          "directory of the blob store (datasets, checkpoints), relative to the working directory "
          "unless absolute");
ABSL_FLAG(std::string, rank_key_file, "",
          "file of the key that signs rank credentials (64 hex characters, mode 0600; made when "
          "missing; every server on one database needs the same one). Default: "
          "<data-dir>/rank-credentials.key");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain; TLS is on when --tls-cert and --tls-key "
          "are given");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls-cert");
ABSL_FLAG(bool, reflection, false,
          "serve gRPC server reflection (for grpcurl), to callers with a valid tenant or admin "
          "token only; off by default");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle of worker certificates (needs --tls-cert): worker calls must present a "
          "client certificate signed by it (mutual TLS; tenants need none), and workers' "
          "generation endpoints are dialled over TLS and verified against it");
ABSL_FLAG(std::string, worker_tls_name, "",
          "with --tls-client-ca: the name (DNS SAN) worker endpoints' certificates carry, checked "
          "instead of each worker's --advertise-host (one certificate shared by workers whose "
          "addresses are not known in advance, e.g. Kubernetes pods)");
ABSL_FLAG(std::string, admin_token_file, "",
          "file holding a token for the admin tenant \"admin\" (created when missing)");
ABSL_FLAG(std::string, join_token_file, "", "file holding a worker join token to accept");
ABSL_FLAG(int64_t, max_dataset_bytes, int64_t{64} << 30, "largest dataset upload accepted");
ABSL_FLAG(int, shutdown_grace_seconds, 5, "seconds calls get to finish on SIGINT/SIGTERM");
ABSL_FLAG(int, health_check_interval_ms, 3000,
          "how often grpc.health.v1 statuses are brought up to date: PostgreSQL probed (services "
          "that need it NOT_SERVING while it is unreachable), serving workers counted "
          "(GenerationService); 0 = only once at start");
ABSL_FLAG(int, heartbeat_interval_ms, 2000, "how often workers are told to heartbeat");
ABSL_FLAG(int, lease_timeout_ms, 15000,
          "a worker silent for longer is lost and the jobs with ranks on it restart (or fail)");
ABSL_FLAG(int, rank_exit_grace_seconds, 30,
          "how long the ranks of an ended or restarting job get to exit before their slots are "
          "released anyway");
ABSL_FLAG(int, hang_timeout_seconds, 300,
          "the progress watchdog restarts a running job when rank 0 reports no new step for "
          "max(this, --hang-step-factor x the median step time)");
ABSL_FLAG(double, hang_step_factor, 20, "see --hang-timeout-seconds");
ABSL_FLAG(int, autoscale_interval_ms, 2000, "how often the pool autoscaler plans (docs/POOLS.md)");
ABSL_FLAG(int, pool_idle_timeout_seconds, 60,
          "an elastic pool's worker idle this long (no ranks) is removed, down to min_workers");
ABSL_FLAG(int, pool_join_timeout_seconds, 600,
          "provisioned workers that have not joined after this no longer count as pending");
ABSL_FLAG(int, pool_backoff_seconds, 10,
          "after a provisioner failure no scale-up for this long, doubling per failure (to 32x)");
ABSL_FLAG(int, budget_refresh_ms, 5000,
          "how old the scheduler's cache of each tenant's monthly spend may get (budgets)");
ABSL_FLAG(int, collective_timeout_ms, 0,
          "Gloo collective timeout given to ranks (0 = the worker's default)");
ABSL_FLAG(int, placing_timeout_seconds, 600,
          "a job whose ranks have not all started after this long fails (dataset download and "
          "rendezvous included)");
ABSL_FLAG(
    int64_t, max_showers_per_request, kSafeLimits.max_showers_per_request,
    "default per-tenant limit on the showers one Generate call may ask for (more is "
    "RESOURCE_EXHAUSTED; 0 = unlimited; AdminService.SetTenantLimits overrides it per tenant: "
    "max_showers_per_request)");
ABSL_FLAG(int, db_connect_timeout_ms, 5000,
          "how long connecting to PostgreSQL may take before a call fails with UNAVAILABLE "
          "(rounded up to whole seconds, at least 2 s)");
ABSL_FLAG(int, db_statement_timeout_ms, 10000,
          "how long one SQL statement may run before a call fails with UNAVAILABLE (0 = no limit)");
ABSL_FLAG(int, auth_cache_ttl_ms, 2000,
          "how long a verified tenant token is reused without asking PostgreSQL (0 = never); "
          "revocations through this server apply at once");
ABSL_FLAG(std::string, file_dataset_roots, "",
          "comma-separated directories jobs may name with file:// datasets (default none: file:// "
          "is refused); workers enforce their own --file-roots on their file system");
ABSL_FLAG(std::string, file_dataset_tenants, "",
          "comma-separated tenants allowed to use file:// datasets, or * for every tenant "
          "(default none)");
ABSL_FLAG(std::string, file_dataset_tenant_roots, "",
          "directories of a tenant's own for file:// datasets, besides the shared ones: "
          "tenant=/dir[,/dir...] entries separated by ';' (default none)");
ABSL_FLAG(int, model_cache_ttl_ms, 2000,
          "how long Generate reuses a resolved model reference (0 = never); alias and archive "
          "changes through this server apply at once");
ABSL_FLAG(int, db_pool_wait_ms, 10000,
          "how long a call waits for a free database connection before it fails with "
          "UNAVAILABLE");
ABSL_FLAG(int64_t, blob_gc_interval_ms, 600000,
          "how often unreferenced blobs are garbage-collected (0 = never)");
ABSL_FLAG(int64_t, blob_gc_grace_ms, 3600000,
          "a blob is deleted only after nothing has used it for this long (at least 100; keep it "
          "well above the slowest upload's inspection)");
ABSL_FLAG(int64_t, study_interval_ms, 1000,
          "how often the study driver advances running studies: collects trial results, stops "
          "poor trials and submits new ones (0 = never)");
ABSL_FLAG(int, max_threads, 256,
          "the most threads gRPC may use to serve calls, per listener (a grpc::ResourceQuota; "
          "with --worker-listen the workers' listener has a budget of its own; 0 = no bound)");
// The --tenant-max-* flags (and --max-showers-per-request) are the defaults of the per-tenant
// limits; AdminService.SetTenantLimits overrides each per tenant. Their own defaults are safe, not
// unlimited (storage::TenantLimits).
ABSL_FLAG(int64_t, tenant_max_dataset_bytes, kSafeLimits.max_dataset_bytes,
          "default per-tenant limit on stored dataset bytes (0 = unlimited; AdminService."
          "SetTenantLimits overrides it per tenant)");
ABSL_FLAG(int64_t, tenant_max_concurrent_jobs, kSafeLimits.max_concurrent_jobs,
          "default per-tenant limit on jobs QUEUED, PLACING, RUNNING or RESTARTING (0 = "
          "unlimited)");
ABSL_FLAG(int64_t, tenant_max_generation_streams, kSafeLimits.max_generation_streams,
          "default per-tenant limit on concurrent Generate calls on this server (0 = unlimited)");
ABSL_FLAG(int64_t, tenant_max_showers_per_minute, kSafeLimits.max_showers_per_minute,
          "default per-tenant rate of generated showers, a token bucket holding one minute's worth "
          "(0 = unlimited)");
ABSL_FLAG(int64_t, tenant_max_study_jobs, kSafeLimits.max_study_jobs,
          "default per-tenant limit on the training jobs one study may run, "
          "spec.budget.max_trials x spec.folds (0 = unlimited)");
ABSL_FLAG(int, watch_poll_interval_ms, 2000,
          "WatchJob re-reads a job at once when this server changes it, and otherwise this often "
          "(changes made by another server)");
ABSL_FLAG(int, stream_token_recheck_ms, 1000,
          "how often long-lived streams check their token again (a revoked token ends them with "
          "UNAUTHENTICATED)");
ABSL_FLAG(int64_t, tenant_max_streams, kSafeLimits.max_streams,
          "default per-tenant limit on concurrent long-lived calls (WatchJob, WatchStudy, "
          "ReadDataset, UploadDataset, Generate, ExportModel) on this server (0 = unlimited)");
ABSL_FLAG(int, stream_header_timeout_ms, 10000,
          "a client stream (UploadDataset) whose header has not arrived this long after it opened "
          "ends with DEADLINE_EXCEEDED, freeing its slot and thread");
ABSL_FLAG(int, stream_idle_timeout_ms, 60000,
          "a client stream (UploadDataset) that sends nothing for this long ends with "
          "DEADLINE_EXCEEDED, freeing its slot and thread");

ABSL_FLAG(std::string, inspect_binary, "",
          "the upload inspection helper run sandboxed per upload (default: gantry-inspect next to "
          "this binary)");
ABSL_FLAG(int, inspect_timeout_ms, 120000, "wall-clock limit of one upload's inspection");
ABSL_FLAG(int, inspect_concurrency, 4,
          "inspections that run at once, server-wide; another upload waits up to 30 s for one to "
          "end, then is UNAVAILABLE");
// An AddressSanitizer build inspects without an address-space limit (base/sanitizers.h).
ABSL_FLAG(int, inspect_memory_mb, gantry::kAddressSanitizer ? 0 : 1024,
          "address-space limit of the inspection child (0 = none, e.g. under AddressSanitizer)");
ABSL_FLAG(double, log_sample_rate, 0.01,
          "share of successful RPCs logged (one line each: method, tenant, code, duration, "
          "request id); failed RPCs are always logged. 0 = none, 1 = all");
ABSL_FLAG(int64_t, max_dataset_events, 50000000, "most events accepted in one uploaded file");

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

  gantry::server::ServerOptions options;
  options.log_sample_rate = absl::GetFlag(FLAGS_log_sample_rate);
  if (!(options.log_sample_rate >= 0 && options.log_sample_rate <= 1)) {
    std::cerr << "gantry-server: --log-sample-rate must be between 0 and 1\n";
    return 2;
  }
  options.listen = absl::GetFlag(FLAGS_listen);
  options.worker_listen = absl::GetFlag(FLAGS_worker_listen);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  for (const auto& [address, flag] : {std::pair{&options.worker_listen, "--worker-listen"},
                                      std::pair{&options.metrics_listen, "--metrics-listen"}}) {
    if (address->empty()) continue;
    if (absl::StatusOr<gantry::HostPort> parsed = gantry::ParseListenAddress(*address, flag);
        !parsed.ok()) {
      std::cerr << "gantry-server: " << parsed.status().message() << "\n";
      return 2;
    }
  }
  options.http_listen = absl::GetFlag(FLAGS_http_listen);
  if (!options.http_listen.empty()) {
    if (absl::StatusOr<gantry::HostPort> parsed =
            gantry::ParseListenAddress(options.http_listen, "--http-listen");
        !parsed.ok()) {
      std::cerr << "gantry-server: " << parsed.status().message() << "\n";
      return 2;
    }
    options.web_root = absl::GetFlag(FLAGS_web_root);
    if (options.web_root.empty()) options.web_root = gantry::server::http::DefaultWebRoot();
  } else if (!absl::GetFlag(FLAGS_web_root).empty()) {
    std::cerr << "gantry-server: --web-root needs --http-listen (the address to serve it on)\n";
    return 2;
  }
  const int session_hours = absl::GetFlag(FLAGS_http_session_hours);
  options.http_max_generate_showers = absl::GetFlag(FLAGS_http_max_generate_showers);
  options.http_max_event_streams = absl::GetFlag(FLAGS_http_max_event_streams);
  options.http_max_event_streams_per_tenant =
      absl::GetFlag(FLAGS_http_max_event_streams_per_tenant);
  if (session_hours < 1 || session_hours > 24 * 30 || options.http_max_generate_showers < 1 ||
      options.http_max_event_streams < 1 || options.http_max_event_streams > 12 ||
      options.http_max_event_streams_per_tenant < 1 ||
      options.http_max_event_streams_per_tenant > options.http_max_event_streams) {
    std::cerr << "gantry-server: --http-session-hours must be 1..720, "
                 "--http-max-generate-showers >= 1, --http-max-event-streams 1..12 (the API has 16 "
                 "handler threads) and --http-max-event-streams-per-tenant 1..that\n";
    return 2;
  }
  options.http_max_connections = absl::GetFlag(FLAGS_http_max_connections);
  options.http_max_connections_per_ip = absl::GetFlag(FLAGS_http_max_connections_per_ip);
  if (options.http_max_connections < 1 || options.http_max_connections > 65536 ||
      options.http_max_connections_per_ip < 1 ||
      options.http_max_connections_per_ip > options.http_max_connections) {
    std::cerr << "gantry-server: --http-max-connections must be 1..65536 and "
                 "--http-max-connections-per-ip 1..that\n";
    return 2;
  }
  options.http_session_ttl = absl::Hours(session_hours);
  options.db_dsn = absl::GetFlag(FLAGS_db);
  if (const std::string db_file = absl::GetFlag(FLAGS_db_file); !db_file.empty()) {
    if (!options.db_dsn.empty()) {
      std::cerr << "gantry-server: give either --db or --db-file, not both\n";
      return 2;
    }
    absl::StatusOr<std::string> dsn =
        gantry::ReadSecretFile(db_file, "--db-file", "the libpq DSN");
    if (!dsn.ok()) {
      std::cerr << "gantry-server: " << dsn.status().message() << "\n";
      return 2;
    }
    options.db_dsn = *std::move(dsn);
  }
  if (const char* env = std::getenv("GANTRY_DB"); options.db_dsn.empty() && env != nullptr) {
    options.db_dsn = env;
  }
  if (options.db_dsn.empty()) {
    std::cerr << "gantry-server: no database: give --db=DSN or set GANTRY_DB (deploy/local/pg.sh "
                 "start prints the DSN of a private PostgreSQL)\n";
    return 2;
  }
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.rank_key_file = absl::GetFlag(FLAGS_rank_key_file);
  options.reflection = absl::GetFlag(FLAGS_reflection);
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  options.worker_tls_name = absl::GetFlag(FLAGS_worker_tls_name);
  options.admin_token_file = absl::GetFlag(FLAGS_admin_token_file);
  options.join_token_file = absl::GetFlag(FLAGS_join_token_file);
  options.max_dataset_bytes = absl::GetFlag(FLAGS_max_dataset_bytes);
  options.shutdown_grace = absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds));
  options.health_check_interval = absl::Milliseconds(absl::GetFlag(FLAGS_health_check_interval_ms));
  if (options.health_check_interval < absl::ZeroDuration() ||
      (options.health_check_interval > absl::ZeroDuration() &&
       options.health_check_interval < absl::Milliseconds(50))) {
    std::cerr << "gantry-server: --health-check-interval-ms must be 0 (check once) or >= 50\n";
    return 2;
  }
  options.heartbeat_interval_ms = absl::GetFlag(FLAGS_heartbeat_interval_ms);
  options.lease_timeout_ms = absl::GetFlag(FLAGS_lease_timeout_ms);
  options.placing_timeout = absl::Seconds(absl::GetFlag(FLAGS_placing_timeout_seconds));
  options.rank_exit_grace = absl::Seconds(absl::GetFlag(FLAGS_rank_exit_grace_seconds));
  options.hang_timeout = absl::Seconds(absl::GetFlag(FLAGS_hang_timeout_seconds));
  options.hang_step_factor = absl::GetFlag(FLAGS_hang_step_factor);
  options.autoscale_interval = absl::Milliseconds(absl::GetFlag(FLAGS_autoscale_interval_ms));
  options.pool_idle_timeout = absl::Seconds(absl::GetFlag(FLAGS_pool_idle_timeout_seconds));
  options.pool_join_timeout = absl::Seconds(absl::GetFlag(FLAGS_pool_join_timeout_seconds));
  options.pool_backoff = absl::Seconds(absl::GetFlag(FLAGS_pool_backoff_seconds));
  if (options.autoscale_interval < absl::Milliseconds(100) ||
      options.pool_idle_timeout < absl::ZeroDuration() ||
      options.pool_join_timeout < absl::Seconds(1) || options.pool_backoff < absl::Seconds(1)) {
    std::cerr << "gantry-server: --autoscale-interval-ms must be >= 100, "
                 "--pool-idle-timeout-seconds >= 0, --pool-join-timeout-seconds and "
                 "--pool-backoff-seconds >= 1\n";
    return 2;
  }
  options.budget_refresh = absl::Milliseconds(absl::GetFlag(FLAGS_budget_refresh_ms));
  if (options.budget_refresh < absl::Milliseconds(100)) {
    std::cerr << "gantry-server: --budget-refresh-ms must be >= 100\n";
    return 2;
  }
  options.collective_timeout_ms = absl::GetFlag(FLAGS_collective_timeout_ms);
  if (options.rank_exit_grace < absl::Seconds(1) || options.hang_timeout < absl::Seconds(1) ||
      !(options.hang_step_factor >= 1) || options.collective_timeout_ms < 0) {
    std::cerr
        << "gantry-server: --rank-exit-grace-seconds and --hang-timeout-seconds must be >= 1, "
           "--hang-step-factor >= 1 and --collective-timeout-ms >= 0\n";
    return 2;
  }
  options.auth_cache_ttl = absl::Milliseconds(absl::GetFlag(FLAGS_auth_cache_ttl_ms));
  options.db_connect_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_db_connect_timeout_ms));
  options.db_statement_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_db_statement_timeout_ms));
  if (options.db_connect_timeout <= absl::ZeroDuration() ||
      options.db_statement_timeout < absl::ZeroDuration()) {
    std::cerr << "gantry-server: --db-connect-timeout-ms must be > 0 and --db-statement-timeout-ms "
                 ">= 0\n";
    return 2;
  }
  options.model_cache_ttl = absl::Milliseconds(absl::GetFlag(FLAGS_model_cache_ttl_ms));
  absl::StatusOr<gantry::FileRoots> file_roots =
      gantry::FileRoots::Parse(absl::GetFlag(FLAGS_file_dataset_roots), "file-dataset-roots");
  if (!file_roots.ok()) {
    std::cerr << "gantry-server: " << file_roots.status().message() << "\n";
    return 2;
  }
  options.file_dataset_roots = *std::move(file_roots);
  for (absl::string_view tenant :
       absl::StrSplit(absl::GetFlag(FLAGS_file_dataset_tenants), ',', absl::SkipWhitespace())) {
    options.file_dataset_tenants.insert(std::string(absl::StripAsciiWhitespace(tenant)));
  }
  absl::StatusOr<std::map<std::string, gantry::FileRoots>> tenant_roots =
      gantry::ParseTenantFileRoots(absl::GetFlag(FLAGS_file_dataset_tenant_roots),
                                   "file-dataset-tenant-roots");
  if (!tenant_roots.ok()) {
    std::cerr << "gantry-server: " << tenant_roots.status().message() << "\n";
    return 2;
  }
  options.file_dataset_tenant_roots = *std::move(tenant_roots);
  options.db_pool_wait = absl::Milliseconds(absl::GetFlag(FLAGS_db_pool_wait_ms));
  options.blob_gc_interval = absl::Milliseconds(absl::GetFlag(FLAGS_blob_gc_interval_ms));
  options.blob_gc_grace = absl::Milliseconds(absl::GetFlag(FLAGS_blob_gc_grace_ms));
  options.max_threads = absl::GetFlag(FLAGS_max_threads);
  options.default_limits.max_dataset_bytes = absl::GetFlag(FLAGS_tenant_max_dataset_bytes);
  options.default_limits.max_concurrent_jobs = absl::GetFlag(FLAGS_tenant_max_concurrent_jobs);
  options.default_limits.max_generation_streams =
      absl::GetFlag(FLAGS_tenant_max_generation_streams);
  options.default_limits.max_showers_per_minute =
      absl::GetFlag(FLAGS_tenant_max_showers_per_minute);
  options.default_limits.max_streams = absl::GetFlag(FLAGS_tenant_max_streams);
  options.default_limits.max_showers_per_request = absl::GetFlag(FLAGS_max_showers_per_request);
  options.default_limits.max_study_jobs = absl::GetFlag(FLAGS_tenant_max_study_jobs);
  options.stream_header_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_stream_header_timeout_ms));
  options.stream_idle_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_stream_idle_timeout_ms));
  if (options.stream_header_timeout < absl::Milliseconds(100) ||
      options.stream_idle_timeout < absl::Milliseconds(100)) {
    std::cerr << "gantry-server: --stream-header-timeout-ms and --stream-idle-timeout-ms must be "
                 ">= 100\n";
    return 2;
  }
  options.watch_poll_interval = absl::Milliseconds(absl::GetFlag(FLAGS_watch_poll_interval_ms));
  options.study_interval = absl::Milliseconds(absl::GetFlag(FLAGS_study_interval_ms));
  if (options.study_interval < absl::ZeroDuration()) {
    std::cerr << "gantry-server: --study-interval-ms must be >= 0\n";
    return 2;
  }
  options.stream_token_recheck = absl::Milliseconds(absl::GetFlag(FLAGS_stream_token_recheck_ms));
  if (options.watch_poll_interval < absl::Milliseconds(50) ||
      options.stream_token_recheck < absl::Milliseconds(50)) {
    std::cerr << "gantry-server: --watch-poll-interval-ms and --stream-token-recheck-ms must be "
                 ">= 50\n";
    return 2;
  }
  if (options.db_pool_wait < absl::Milliseconds(1) ||
      options.blob_gc_interval < absl::ZeroDuration() ||
      options.blob_gc_grace < absl::Milliseconds(100) || options.max_threads < 0 ||
      options.default_limits.max_dataset_bytes < 0 ||
      options.default_limits.max_concurrent_jobs < 0 ||
      options.default_limits.max_generation_streams < 0 ||
      options.default_limits.max_showers_per_minute < 0 || options.default_limits.max_streams < 0 ||
      options.default_limits.max_study_jobs < 0 ||
      options.default_limits.max_showers_per_request < 0) {
    std::cerr << "gantry-server: --db-pool-wait-ms must be >= 1, --blob-gc-grace-ms >= 100, "
                 "--blob-gc-interval-ms, --max-threads, --tenant-max-* and "
                 "--max-showers-per-request >= 0\n";
    return 2;
  }
  if (options.max_threads != 0 && options.max_threads < 8) {
    std::cerr << "gantry-server: --max-threads must be 0 (no bound) or at least 8\n";
    return 2;
  }
  options.inspector.binary = absl::GetFlag(FLAGS_inspect_binary);
  if (options.inspector.binary.empty()) {
    options.inspector.binary = gantry::showers::DefaultInspectBinary();
  }
  options.inspector.timeout = absl::Milliseconds(absl::GetFlag(FLAGS_inspect_timeout_ms));
  options.inspector.max_concurrent = absl::GetFlag(FLAGS_inspect_concurrency);
  options.inspector.limits.address_space_bytes = int64_t{absl::GetFlag(FLAGS_inspect_memory_mb)}
                                                 << 20;
  options.inspector.limits.cpu_seconds = 0;  // follows the timeout
  options.inspector.file_limits.max_events = absl::GetFlag(FLAGS_max_dataset_events);
  if (access(options.inspector.binary.c_str(), X_OK) != 0) {
    std::cerr << "gantry-server: the upload inspection helper " << options.inspector.binary
              << " is not an executable file; build gantry-inspect or set --inspect-binary\n";
    return 2;
  }
  if (options.inspector.timeout < absl::Milliseconds(100) ||
      absl::GetFlag(FLAGS_inspect_memory_mb) < 0 || options.inspector.file_limits.max_events < 1 ||
      options.inspector.max_concurrent < 1 || options.inspector.max_concurrent > 1024) {
    std::cerr << "gantry-server: --inspect-timeout-ms must be >= 100, --inspect-memory-mb >= 0, "
                 "--inspect-concurrency 1-1024 and --max-dataset-events >= 1\n";
    return 2;
  }
  if (options.heartbeat_interval_ms < 100 ||
      options.lease_timeout_ms < 2 * options.heartbeat_interval_ms) {
    std::cerr << "gantry-server: --heartbeat-interval-ms must be >= 100 and --lease-timeout-ms at "
                 "least twice the heartbeat interval\n";
    return 2;
  }

  // The data directory (blobs, the rank key, downloads) and everything the server writes are its
  // user's alone.
  gantry::UsePrivateUmask();
  absl::StatusOr<std::string> private_data = gantry::MakePrivateDirectory(options.data_dir);
  if (!private_data.ok()) {
    std::cerr << "gantry-server: --data-dir: " << private_data.status().message() << "\n";
    return 2;
  }
  if (!private_data->empty()) GANTRY_LOG(WARNING) << "--data-dir: " << *private_data;

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
                   << options.data_dir << (options.tls_cert_file.empty() ? "" : ", TLS on")
                   << (options.tls_client_ca_file.empty() ? "" : ", mutual TLS for workers");
  if (!(*server)->metrics_address().empty()) {
    GANTRY_LOG(INFO) << "metrics on http://" << (*server)->metrics_address() << "/metrics";
  }
  if (!(*server)->worker_address().empty()) {
    // Printed before "listening on", which tells scripts and tests the server is up.
    std::cout << "worker protocol on " << (*server)->worker_address() << std::endl;
  }
  if (!(*server)->http_address().empty()) {
    GANTRY_LOG(INFO) << "HTTP API on " << (options.tls_cert_file.empty() ? "http" : "https")
                     << "://" << (*server)->http_address() << "/"
                     << (options.web_root.empty() ? " (no web app: --web-root)"
                                                  : ", web app from " + options.web_root);
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
