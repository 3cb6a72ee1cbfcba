#include "server/gantry_server.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "base/tls_config.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "server/platform/request_log.h"

namespace gantry::server {
namespace {

// The server's TLS material: its own certificate (--tls-cert/--tls-key) in `listener`, and the
// worker CA (--tls-client-ca) as `workers.ca_pem`.
struct ServerTls {
  TlsConfig listener;
  TlsConfig workers;
};

absl::StatusOr<ServerTls> LoadServerTls(const ServerOptions& o) {
  ServerTls tls;
  TlsFiles own;
  own.cert = o.tls.cert_file;
  own.key = o.tls.key_file;
  ASSIGN_OR_RETURN(tls.listener, LoadTlsConfig(own));
  if (!o.tls.client_ca_file.empty()) {
    if (!tls.listener.has_identity()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca needs TLS on: give --tls-cert and --tls-key too");
    }
    TlsFiles workers;
    workers.ca_cert = o.tls.client_ca_file;
    workers.ca_cert_flag = "--tls-client-ca";
    ASSIGN_OR_RETURN(tls.workers, LoadTlsConfig(workers));
  }
  if (!o.tls.worker_name.empty()) {
    if (o.tls.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--worker-tls-name needs --tls-client-ca (worker endpoints are dialled over TLS only "
          "with it)");
    }
    const bool dns_name =
        o.tls.worker_name.size() <= 253 &&
        std::all_of(o.tls.worker_name.begin(), o.tls.worker_name.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
        });
    if (!dns_name) {
      return absl::InvalidArgumentError(
          "--worker-tls-name: give a DNS name (letters, digits, '-' and '.', at most 253), the "
          "name in the workers' certificate");
    }
  }
  return tls;
}

// The host part of "host:port" ("[::1]:0" keeps its brackets).
std::string HostOf(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  return colon == std::string::npos ? listen : listen.substr(0, colon);
}

// One grpc::Server of gantry-server: where it listens (and the flag that said so), the services it
// carries and whose credentials it accepts.
struct Listener {
  std::string address;
  const char* flag;
  std::vector<grpc::Service*> services;
  ListenerRole role;
};

// Takes gRPC's reflection plugin out of a server builder. Linking grpc++_reflection registers the
// plugin for every server in the process when the library loads, so a server without --reflection
// removes it.
class WithoutReflection : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
                                    return plugin->name() == "proto_server_reflection";
                                  }),
                   plugins->end());
  }
};

// The grpc::Server of `listener`, serving, with what every listener shares: TLS, message sizes,
// the thread bound (`quota`, one for all listeners), keepalive, and the interceptors (request log
// and RPC metrics, then authentication into `auth`). *bound is the "host:port" it listens on.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartListener(
    const Listener& listener, const ServerOptions& options,
    const std::shared_ptr<grpc::ServerCredentials>& creds, const grpc::ResourceQuota* quota,
    AuthInterceptorFactory& auth, std::string* bound) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listener.address, creds, &port);
  for (grpc::Service* service : listener.services) builder.RegisterService(service);
  if (!options.reflection) builder.SetOption(std::make_unique<WithoutReflection>());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // A bounded thread pool: past max_threads, gRPC refuses new calls (RESOURCE_EXHAUSTED) instead
  // of starting more threads.
  if (quota != nullptr) builder.SetResourceQuota(*quota);
  // Long-lived streams (WatchJob, worker Connect): ping idle connections, and accept client pings.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // A taken port fails the start: with SO_REUSEPORT (gRPC's default on Linux) a second server
  // would share it silently and take half of the connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  // Request ids, the per-call log line and the RPC metrics first: every answered call is counted,
  // whatever authentication decides; the log reads authentication's result.
  interceptors.push_back(
      std::make_unique<RequestLogInterceptorFactory>(&auth, options.log_sample_rate));
  interceptors.push_back(auth.ForListener(listener.role));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));

  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat(listener.flag, ": cannot listen on ",
                                               listener.address, " (address in use or invalid)"));
  }
  *bound = absl::StrCat(HostOf(listener.address), ":", port);
  return server;
}

// How often the stream watchdog checks deadlines: a tenth of the shorter one, 10 ms to 1 s.
absl::Duration WatchdogTick(const ServerOptions& options) {
  return std::clamp(std::min(options.streams.header_timeout, options.streams.idle_timeout) / 10,
                    absl::Milliseconds(10), absl::Seconds(1));
}

// The grpc.health.v1 names the worker listener answers for (the rest are NOT_FOUND there).
bool WorkerListenerCarries(const std::string& service) {
  return service.empty() || service == HealthMonitor::kWorkerService ||
         service == gantry::v1::DatasetService::service_full_name();
}

// What the job coordinator's parts use, from the Backend's members.
CoordinatorDeps CoordinatorDepsOf(Backend& b) {
  return CoordinatorDeps{*b.jobs,
                         *b.datasets,
                         *b.models,
                         *b.studies,
                         *b.pools,
                         *b.workers,
                         *b.identities,
                         *b.tenant_limits,
                         *b.costs,
                         *b.blobs,
                         *b.quotas,
                         *b.credentials,
                         b.options.coordinator,
                         b.options.file_datasets};
}

}  // namespace

// The composition root: every service and subsystem gets what it uses, from the Backend's members
// (the Backend itself is passed where one needs its CallAuth or ModelResolver). Members are built
// in their declaration order (gantry_server.h).
GantryServer::GantryServer(std::unique_ptr<Backend> backend)
    : backend_(std::move(backend)),
      coordinator_(CoordinatorDepsOf(*backend_), &router_),
      pinner_(*backend_->model_pins, *backend_->workers, router_, coordinator_.sessions(),
              backend_->worker_channels),
      autoscaler_(*backend_->pools, backend_->options.pools, coordinator_),
      watch_pump_(kWatchPumpThreads),
      submitter_(*backend_->jobs, *backend_->datasets, *backend_->models, *backend_->pools,
                 *backend_->quotas, backend_->options.file_datasets),
      training_(*backend_, submitter_, *backend_->jobs, *backend_->costs, *backend_->pools,
                *backend_->quotas, backend_->job_notifier, watch_pump_),
      generation_(*backend_, *backend_, *backend_->quotas, router_, backend_->worker_channels,
                  backend_->options.streams.token_recheck, backend_->options.max_message_bytes),
      exports_(*backend_, router_, backend_->worker_channels,
               backend_->options.streams.token_recheck),
      catalog_(*backend_, *backend_, *backend_->models, *backend_->jobs, *backend_->quotas,
               &coordinator_.sessions(), router_, exports_),
      stream_watchdog_(WatchdogTick(backend_->options)),
      datasets_(*backend_, *backend_->datasets, *backend_->jobs, *backend_->blobs,
                *backend_->blob_refs, *backend_->quotas, stream_watchdog_,
                backend_->options.streams, backend_->options.max_dataset_bytes,
                backend_->options.blob_gc_grace, backend_->options.inspector),
      workers_(*backend_, *backend_->workers, *backend_->identities, *backend_->credentials,
               *backend_->jobs, *backend_->models, *backend_->blobs, *backend_->blob_refs,
               coordinator_.sessions(), backend_->options.coordinator,
               backend_->options.max_checkpoint_bytes, backend_->shutting_down),
      worker_datasets_(datasets_),
      admin_(*backend_, *backend_, *backend_->tenants, *backend_->tokens, *backend_->identities,
             *backend_->credentials, *backend_->workers, *backend_->models,
             *backend_->tenant_limits, *backend_->costs, *backend_->pools, *backend_->quotas,
             coordinator_.sessions(), pinner_, autoscaler_),
      blob_collector_(*backend_->blob_refs, *backend_->blobs, backend_->options.blob_gc_interval,
                      backend_->options.blob_gc_grace),
      studies_(*backend_, submitter_, *backend_->studies, *backend_->jobs, *backend_->quotas,
               watch_pump_),
      study_driver_(*backend_->studies, *backend_->jobs, *backend_->models, *backend_, submitter_,
                    backend_->options.coordinator.study_interval) {}

GantryServer::~GantryServer() {
  if (server_ != nullptr) {
    Shutdown();
    Wait();
  }
}

absl::StatusOr<std::unique_ptr<GantryServer>> GantryServer::Start(const ServerOptions& options) {
  ASSIGN_OR_RETURN(const ServerTls tls, LoadServerTls(options));
  if (!options.worker_listen.empty() && options.worker_listen == options.listen) {
    return absl::InvalidArgumentError(
        absl::StrCat("--worker-listen: ", options.worker_listen,
                     " is --listen's address; give the worker protocol a port of its own, or leave "
                     "--worker-listen empty to serve workers on --listen"));
  }
  // The metrics endpoint binds first: a bad or taken --metrics-listen fails before anything starts.
  std::unique_ptr<metrics::MetricsHttpServer> metrics_http;
  if (!options.metrics_listen.empty()) {
    ASSIGN_OR_RETURN(metrics_http,
                     metrics::MetricsHttpServer::Start(options.metrics_listen, "--metrics-listen",
                                                       &metrics::ProcessMetrics()));
  }
  std::shared_ptr<grpc::ServerCredentials> creds =
      ServerCredentialsFor(tls.listener, tls.workers.ca_pem);
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, Backend::Create(options));
  if (tls.workers.trusts_ca()) {
    backend->worker_channels = {ChannelCredentialsFor(tls.workers), options.tls.worker_name};
  }
  std::unique_ptr<GantryServer> server(new GantryServer(std::move(backend)));
  GantryServer& s = *server;
  Backend* b = s.backend_.get();
  s.stream_watchdog_.Start();  // before the first upload can arrive

  // Health checking answers everyone (load balancers and probes carry no token); reflection is
  // opt-in and authenticated (AuthInterceptorFactory).
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();  // taken out again without it
  s.auth_ =
      std::make_unique<AuthInterceptorFactory>([b](Audience audience, const std::string& secret) {
        return b->VerifyToken(audience, secret);
      });
  if (tls.workers.trusts_ca()) s.auth_->RequireWorkerCertificates();
  // A key only this process knows marks the HTTP API's in-process calls (browser sessions).
  const std::string http_api_key = RandomSecretHex(32);
  s.auth_->set_http_api_key(http_api_key);
  b->auth = s.auth_.get();
  RETURN_IF_ERROR(s.StartListeners(options, creds));
  RETURN_IF_ERROR(s.StartHealthMonitor(options));
  s.metrics_collector_ = std::make_unique<ServerMetricsCollector>(
      metrics::ProcessMetrics(), *b->jobs, *b->db,
      [coordinator = &s.coordinator_] { return coordinator->Snapshot(); }, s.health_db_.get());
  s.metrics_http_ = std::move(metrics_http);
  RETURN_IF_ERROR(
      s.StartHttpApi(options, tls.listener.cert_pem, tls.listener.key_pem, http_api_key));
  s.coordinator_.Start();
  s.pinner_.Start();
  s.autoscaler_.Start();
  s.study_driver_.Start();
  s.blob_collector_.Start();
  return server;
}

absl::Status GantryServer::StartListeners(const ServerOptions& options,
                                          std::shared_ptr<grpc::ServerCredentials> creds) {
  // Thread budgets: one for the main listener and, with --worker-listen, one of its own for the
  // workers' listener, so that tenant calls (however many, however slow) never take the threads
  // workers need for their streams, uploads and dataset reads.
  std::optional<grpc::ResourceQuota> quota, worker_quota;
  if (options.max_threads > 0) {
    quota.emplace("gantry-server");
    quota->SetMaxThreads(options.max_threads);
    worker_quota.emplace("gantry-server-workers");
    worker_quota->SetMaxThreads(options.max_threads);
  }
  const grpc::ResourceQuota* shared_quota = quota.has_value() ? &*quota : nullptr;
  const grpc::ResourceQuota* workers_quota = worker_quota.has_value() ? &*worker_quota : nullptr;
  const bool split = !options.worker_listen.empty();
  Listener main{options.listen,
                "--listen",
                {&training_, &generation_, &catalog_, &datasets_, &admin_, &studies_},
                split ? ListenerRole::kTenants : ListenerRole::kEveryone};
  if (!split) main.services.push_back(&workers_);
  ASSIGN_OR_RETURN(server_, StartListener(main, options, creds, shared_quota, *auth_, &address_));
  if (split) {
    const Listener workers{options.worker_listen,
                           "--worker-listen",
                           {&workers_, &worker_datasets_},
                           ListenerRole::kWorkers};
    ASSIGN_OR_RETURN(worker_server_, StartListener(workers, options, creds, workers_quota, *auth_,
                                                   &worker_address_));
  }
  return absl::OkStatus();
}

absl::Status GantryServer::StartHealthMonitor(const ServerOptions& options) {
  // The health monitor probes PostgreSQL on a connection of its own with short timeouts, so a
  // pool full of slow calls does not read as an outage.
  storage::DatabaseOptions probe;
  probe.pool_size = 1;
  probe.connect_timeout = absl::Seconds(2);
  probe.statement_timeout = absl::Seconds(2);
  probe.pool_wait = absl::Seconds(2);
  ASSIGN_OR_RETURN(health_db_, storage::Database::Create(options.db.dsn, probe));
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  grpc::HealthCheckServiceInterface* worker_health =
      worker_server_ != nullptr ? worker_server_->GetHealthCheckService() : nullptr;
  storage::Database* health_db = health_db_.get();
  scheduler::GenerationRouter* router = &router_;
  // Each listener answers for the services it carries: with a worker listener, WorkerService's
  // status lives there only.
  health_ = std::make_unique<HealthMonitor>(
      options.health_check_interval, [health_db] { return health_db->Ping(); },
      [router] { return router->ServingWorkers(); },
      [health, worker_health](const std::string& service, bool serving) {
        if (worker_health == nullptr || service != HealthMonitor::kWorkerService) {
          health->SetServingStatus(service, serving);
        }
        if (worker_health != nullptr && WorkerListenerCarries(service)) {
          worker_health->SetServingStatus(service, serving);
        }
      });
  health_->Start();
  return absl::OkStatus();
}

absl::Status GantryServer::StartHttpApi(const ServerOptions& options, const std::string& cert_pem,
                                        const std::string& key_pem,
                                        const std::string& in_process_key) {
  if (options.http.listen.empty()) return absl::OkStatus();
  http::HttpApiOptions http_options;
  http_options.listen = options.http.listen;
  http_options.web_root = options.http.web_root;
  http_options.tls_cert_pem = cert_pem;
  http_options.tls_key_pem = key_pem;
  http_options.session_ttl = options.http.session_ttl;
  http_options.max_generate_showers = options.http.max_generate_showers;
  http_options.max_event_streams = options.http.max_event_streams;
  http_options.max_event_streams_per_tenant = options.http.max_event_streams_per_tenant;
  http_options.max_connections = options.http.max_connections;
  http_options.max_connections_per_ip = options.http.max_connections_per_ip;
  http_options.temp_dir = options.data_dir + "/http-downloads";
  http_options.in_process_key = in_process_key;
  Backend* b = backend_.get();
  ASSIGN_OR_RETURN(http_, http::HttpApiServer::Start(
                              http_options, *backend_,
                              [b](Audience audience, const std::string& secret) {
                                return b->VerifyToken(audience, secret);
                              },
                              *backend_->web_sessions, *backend_->jobs,
                              server_->InProcessChannel(grpc::ChannelArguments())));
  return absl::OkStatus();
}

void GantryServer::Shutdown() {
  if (backend_->shutting_down.exchange(true)) return;
  watch_pump_.WakeAll();  // watches end now, not at their next poll
  if (health_ != nullptr) health_->Stop();
  pinner_.Stop();
  autoscaler_.Stop();
  coordinator_.Stop();
  blob_collector_.Stop();
  study_driver_.Stop();
  // Both listeners drain within the same grace, side by side.
  const absl::Time deadline = absl::Now() + backend_->options.shutdown_grace;
  std::vector<std::thread> draining;
  for (grpc::Server* listener : {server_.get(), worker_server_.get()}) {
    if (listener == nullptr) continue;
    listener->GetHealthCheckService()->SetServingStatus(false);
    draining.emplace_back(
        [listener, deadline] { listener->Shutdown(absl::ToChronoTime(deadline)); });
  }
  for (std::thread& t : draining) t.join();
  http_.reset();
}

void GantryServer::Wait() {
  if (server_ != nullptr) server_->Wait();
  if (worker_server_ != nullptr) worker_server_->Wait();
}

}  // namespace gantry::server
