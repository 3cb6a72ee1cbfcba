#include "server/gantry_server.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "base/tls_config.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "server/request_log.h"
#include "server/rpc_metrics.h"

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
  own.cert = o.tls_cert_file;
  own.key = o.tls_key_file;
  ASSIGN_OR_RETURN(tls.listener, LoadTlsConfig(own));
  if (!o.tls_client_ca_file.empty()) {
    if (!tls.listener.has_identity()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca needs TLS on: give --tls-cert and --tls-key too");
    }
    TlsFiles workers;
    workers.ca_cert = o.tls_client_ca_file;
    workers.ca_cert_flag = "--tls-client-ca";
    ASSIGN_OR_RETURN(tls.workers, LoadTlsConfig(workers));
  }
  return tls;
}

// The host part of "host:port" ("[::1]:0" keeps its brackets).
std::string HostOf(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  return colon == std::string::npos ? listen : listen.substr(0, colon);
}

}  // namespace

GantryServer::GantryServer(std::unique_ptr<Backend> backend)
    : backend_(std::move(backend)),
      coordinator_(*backend_, &router_),
      training_(*backend_),
      generation_(*backend_, router_),
      catalog_(*backend_, &coordinator_.sessions(), router_),
      datasets_(*backend_),
      workers_(*backend_, coordinator_.sessions()),
      pinner_(*backend_, router_, coordinator_.sessions()),
      admin_(*backend_, coordinator_.sessions(), pinner_),
      blob_collector_(*backend_->blob_refs, *backend_->blobs, backend_->options.blob_gc_interval,
                      backend_->options.blob_gc_grace) {}

GantryServer::~GantryServer() {
  if (server_ != nullptr) {
    Shutdown();
    server_->Wait();
  }
}

absl::StatusOr<std::unique_ptr<GantryServer>> GantryServer::Start(const ServerOptions& options) {
  ASSIGN_OR_RETURN(const ServerTls tls, LoadServerTls(options));
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
    backend->worker_channel_credentials = ChannelCredentialsFor(tls.workers);
  }
  std::unique_ptr<GantryServer> server(new GantryServer(std::move(backend)));
  Backend* b = server->backend_.get();

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, creds, &port);
  builder.RegisterService(&server->training_);
  builder.RegisterService(&server->generation_);
  builder.RegisterService(&server->catalog_);
  builder.RegisterService(&server->datasets_);
  builder.RegisterService(&server->workers_);
  builder.RegisterService(&server->admin_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // A bounded thread pool: past max_threads, gRPC refuses new calls (RESOURCE_EXHAUSTED) instead
  // of starting more threads.
  if (options.max_threads > 0) {
    grpc::ResourceQuota quota("gantry-server");
    quota.SetMaxThreads(options.max_threads);
    builder.SetResourceQuota(quota);
  }
  // Long-lived streams (WatchJob, worker Connect): ping idle connections, and accept client pings.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  auto auth =
      std::make_unique<AuthInterceptorFactory>([b](Audience audience, const std::string& secret) {
        return b->VerifyToken(audience, secret);
      });
  if (tls.workers.trusts_ca()) auth->RequireWorkerCertificates();
  // A key only this process knows marks the HTTP API's in-process calls (browser sessions).
  const std::string http_api_key = RandomSecretHex(32);
  auth->set_http_api_key(http_api_key);
  b->auth = auth.get();
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  // Every answered call is counted, whatever the later interceptors decide.
  interceptors.push_back(std::make_unique<RpcMetricsInterceptorFactory>());
  // Request ids and the per-call log line first; authentication results are read by both.
  interceptors.push_back(
      std::make_unique<RequestLogInterceptorFactory>(auth.get(), options.log_sample_rate));
  interceptors.push_back(std::move(auth));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));

  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    server->server_.reset();
    return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ", options.listen,
                                               " (address in use or invalid)"));
  }
  server->address_ = absl::StrCat(HostOf(options.listen), ":", port);
  // The health monitor probes PostgreSQL on a connection of its own with short timeouts, so a
  // pool full of slow calls does not read as an outage.
  storage::DatabaseOptions probe;
  probe.pool_size = 1;
  probe.connect_timeout = absl::Seconds(2);
  probe.statement_timeout = absl::Seconds(2);
  probe.pool_wait = absl::Seconds(2);
  ASSIGN_OR_RETURN(server->health_db_, storage::Database::Create(options.db_dsn, probe));
  grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService();
  storage::Database* health_db = server->health_db_.get();
  GenerationRouter* router = &server->router_;
  server->health_ = std::make_unique<HealthMonitor>(
      options.health_check_interval, [health_db] { return health_db->Ping(); },
      [router] { return router->ServingWorkers(); },
      [health](const std::string& service, bool serving) {
        health->SetServingStatus(service, serving);
      });
  server->health_->Start();
  server->metrics_collector_ = std::make_unique<ServerMetricsCollector>(
      metrics::ProcessMetrics(), *b, server->coordinator_.state(), server->health_db_.get());
  server->metrics_http_ = std::move(metrics_http);
  if (!options.http_listen.empty()) {
    http::HttpApiOptions http_options;
    http_options.listen = options.http_listen;
    http_options.web_root = options.web_root;
    http_options.tls_cert_file = options.tls_cert_file;
    http_options.tls_key_file = options.tls_key_file;
    http_options.session_ttl = options.http_session_ttl;
    http_options.max_generate_showers = options.http_max_generate_showers;
    http_options.temp_dir = options.data_dir + "/http-downloads";
    http_options.in_process_key = http_api_key;
    ASSIGN_OR_RETURN(
        server->http_,
        http::HttpApiServer::Start(http_options, *b,
                                   server->server_->InProcessChannel(grpc::ChannelArguments())));
  }
  server->coordinator_.Start();
  server->pinner_.Start();
  server->blob_collector_.Start();
  return server;
}

void GantryServer::Shutdown() {
  if (backend_->shutting_down.exchange(true)) return;
  if (health_ != nullptr) health_->Stop();
  pinner_.Stop();
  coordinator_.Stop();
  blob_collector_.Stop();
  server_->GetHealthCheckService()->SetServingStatus(false);
  server_->Shutdown(absl::ToChronoTime(absl::Now() + backend_->options.shutdown_grace));
  http_.reset();
}

void GantryServer::Wait() { server_->Wait(); }

}  // namespace gantry::server
