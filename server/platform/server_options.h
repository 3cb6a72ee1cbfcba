// ServerOptions: everything gantry-server is configured with, one group per subsystem (built from
// flags by BuildServerOptions only).
#ifndef GANTRY_SERVER_PLATFORM_SERVER_OPTIONS_H_
#define GANTRY_SERVER_PLATFORM_SERVER_OPTIONS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "base/file_roots.h"
#include "showers/sandboxed_inspector.h"
#include "storage/tenant_limits.h"

namespace gantry::server {

// The HTTP API and web app (server/http).
struct HttpOptions {
  // host:port of the HTTP API and web app (server/http); empty = off. Over TLS (tls.cert_file and
  // tls.key_file) it serves HTTPS with the same certificate.
  std::string listen;
  std::string web_root;                          // the built web app; empty = none (API only)
  absl::Duration session_ttl = absl::Hours(12);  // browser sessions last this long
  int64_t max_generate_showers = 2000;           // per POST /api/v1/generate
  int max_event_streams = 8;                     // job event streams at once, server-wide
  int max_event_streams_per_tenant = 2;          // and per tenant
  int max_connections = 512;                     // open HTTP connections at once
  int max_connections_per_ip = 64;               // and from one client address
};

// PostgreSQL.
struct DatabaseOptions {
  std::string dsn;  // libpq DSN
  int pool_size = 16;
  // How long connecting to PostgreSQL, and one statement, may take before the call gives up with
  // UNAVAILABLE (a tick or an RPC then fails fast instead of blocking a thread).
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration statement_timeout = absl::Seconds(10);
  // How long a call waits for a free pooled connection before it fails with UNAVAILABLE.
  absl::Duration pool_wait = absl::Seconds(10);
};

// TLS of every listener, and of the router's calls to workers.
struct TlsOptions {
  std::string cert_file;  // PEM; TLS only when both cert and key are given
  std::string key_file;
  // PEM CA bundle of worker certificates. When set (TLS on): WorkerService calls, and ReadDataset
  // calls made with a join token, need a client certificate verified against it; tenants connect
  // without one. The server also dials workers' generation endpoints over TLS and verifies their
  // certificates against it.
  std::string client_ca_file;
  // With client_ca_file: the name every worker endpoint's certificate carries (one certificate
  // shared by the workers of a deployment, e.g. "gantry-worker"), checked instead of each worker's
  // advertise host; for workers whose addresses are not known when their certificate is made (pod
  // IPs). Empty: the advertise host.
  std::string worker_name;
};

// The job coordinator and the study driver (server/coordinator).
struct CoordinatorOptions {
  int heartbeat_interval_ms = 2000;
  int lease_timeout_ms = 15000;
  // Job coordinator: how often it schedules; how long a job may stay PLACING before its ranks all
  // run (dataset download, rendezvous); how long ranks of an ended job get to exit before their
  // slots are released anyway; the least time between two progress events of a job.
  absl::Duration scheduler_tick = absl::Milliseconds(200);
  absl::Duration placing_timeout = absl::Minutes(10);
  absl::Duration rank_exit_grace = absl::Seconds(30);
  absl::Duration progress_event_interval = absl::Seconds(1);
  // Monthly budgets: how old the placement loop's cache of each tenant's spend may get.
  absl::Duration budget_refresh = absl::Seconds(5);
  // Fault tolerance. The progress watchdog restarts a RUNNING job (reason NoProgress) when rank 0
  // reports no new step for max(hang_timeout, hang_step_factor x the median step time). Ranks get
  // collective_timeout_ms as their Gloo timeout (0 = the worker's default).
  absl::Duration hang_timeout = absl::Minutes(5);
  double hang_step_factor = 20;
  int collective_timeout_ms = 0;
  // How often the study driver advances the running studies (0 = never: studies are stored but
  // run nowhere, e.g. on a read-only replica).
  absl::Duration study_interval = absl::Seconds(1);
};

// Elastic pools (server/pools).
struct PoolOptions {
  // docs/POOLS.md. How often the autoscaler plans; how long an idle provisioned
  // worker above min_workers stays; how long provisioned workers count as pending before they
  // must have joined; the first backoff after a provisioner failure (doubling up to 32x).
  absl::Duration autoscale_interval = absl::Seconds(2);
  absl::Duration idle_timeout = absl::Seconds(60);
  absl::Duration join_timeout = absl::Minutes(10);
  absl::Duration backoff = absl::Seconds(10);
};

// Long-lived calls: client streams, watches, token rechecks.
struct StreamOptions {
  // Client streams (UploadDataset): a stream whose first message has not arrived within
  // header_timeout of its start, or that sends nothing for idle_timeout between
  // messages, ends with DEADLINE_EXCEEDED and frees its slot and thread (StreamWatchdog).
  absl::Duration header_timeout = absl::Seconds(10);
  absl::Duration idle_timeout = absl::Seconds(60);
  // WatchJob re-reads a job when this server writes a change of it (JobNotifier), and otherwise
  // every watch_poll_interval (changes made by another process).
  absl::Duration watch_poll_interval = absl::Seconds(2);
  // Long-lived streams (WatchJob, Generate, ReadDataset) check their token again this often; a
  // revoked token ends them with UNAUTHENTICATED within this plus auth_cache_ttl.
  absl::Duration token_recheck = absl::Seconds(1);
};

// file:// datasets.
struct FileDatasetOptions {
  // The shared directories a job may name (checked lexically at submit; workers
  // check their own --file-roots with realpath), the tenants allowed to use them ("*" = every
  // tenant), and directories of a tenant's own. All empty by default: file:// is refused.
  FileRoots roots;
  std::set<std::string> tenants;
  std::map<std::string, FileRoots> tenant_roots;

  // The directories `tenant` may name in file:// datasets: the shared ones when the tenant is
  // allowed them, then its own. Sent to the workers with each assignment, which read only files
  // that resolve under one of these and under their own --file-roots.
  FileRoots RootsOf(const std::string& tenant) const {
    FileRoots allowed;
    if (tenants.count("*") != 0 || tenants.count(tenant) != 0) {
      allowed = roots;
    }
    const auto own = tenant_roots.find(tenant);
    return own == tenant_roots.end() ? allowed : allowed.Merged(own->second);
  }
};

// Everything gantry-server is configured with, grouped by the subsystem that reads it.
struct ServerOptions {
  std::string listen = "127.0.0.1:50051";  // host:port; port 0 picks a free one
  // host:port of a second gRPC listener that carries only what workers call (WorkerService,
  // DatasetService.ReadDataset) and grpc.health.v1, with the same TLS as `listen`, so a network
  // policy can admit only workers to it. When set, `listen` serves tenants only: WorkerService is
  // UNIMPLEMENTED there and worker credentials are refused. Empty: `listen` serves everything.
  std::string worker_listen;
  // host:port of the Prometheus /metrics endpoint (plain HTTP); empty = off.
  std::string metrics_listen;
  std::string data_dir;  // blob store root
  // The rank-credential key (server/platform/secret_file.h LoadOrCreateKeyFile); empty =
  // <data_dir>/rank-credentials.key.
  std::string rank_key_file;
  // gRPC server reflection (grpcurl, Postman): off unless set; when on, only for callers with a
  // valid tenant or admin token (UNAUTHENTICATED otherwise). Health checking needs no token.
  bool reflection = false;
  std::string admin_token_file;  // bootstrap: tenant "admin" gets this token
  std::string join_token_file;   // bootstrap: a worker join token
  // Blob garbage collection: how often it runs (0 = never) and how long a blob must have been
  // unreferenced (and unpinned by an upload) before it is deleted.
  absl::Duration blob_gc_interval = absl::Minutes(10);
  absl::Duration blob_gc_grace = absl::Hours(1);
  // The most threads gRPC may use for synchronous calls, per listener
  // (grpc::ResourceQuota::SetMaxThreads); 0 = no bound. Watches run on the callback API and take
  // none while they wait.
  int max_threads = 256;
  // Per-tenant limits every tenant has unless AdminService.SetTenantLimits stored an override
  // (0 = unlimited): dataset bytes, active jobs, generation streams, showers per minute and per
  // call, long-lived calls, jobs per study. The initial values are safe, not unlimited
  // (storage::TenantLimits).
  storage::TenantLimits default_limits;
  int64_t max_dataset_bytes = int64_t{64} << 30;    // 64 GiB
  int64_t max_checkpoint_bytes = int64_t{4} << 30;  // 4 GiB
  int max_message_bytes = 16 << 20;                 // gRPC max send/receive message size
  absl::Duration shutdown_grace = absl::Seconds(5);
  // How often the health monitor probes PostgreSQL and counts serving workers (grpc.health.v1
  // statuses follow within this); 0 = only once at start.
  absl::Duration health_check_interval = absl::Seconds(3);
  // The share of successful RPCs that get a log line (failed ones always do): 0..1.
  double log_sample_rate = 0.01;
  // How long a verified tenant token and a resolved model reference are reused without asking
  // PostgreSQL again (0 = never). Changes made through this server (RevokeToken, SetAlias,
  // DeleteAlias, ArchiveModel) clear the caches at once; changes made elsewhere (another server,
  // SQL) are seen within this time.
  absl::Duration auth_cache_ttl = absl::Seconds(2);
  absl::Duration model_cache_ttl = absl::Seconds(2);
  // How uploaded files are inspected (a sandboxed gantry-inspect child per upload).
  showers::InspectorOptions inspector;

  HttpOptions http;
  DatabaseOptions db;
  TlsOptions tls;
  CoordinatorOptions coordinator;
  PoolOptions pools;
  StreamOptions streams;
  FileDatasetOptions file_datasets;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_SERVER_OPTIONS_H_
