// GantryServer: a running gantry-server: the Backend, every gantry.v1 service, health checking
// that follows the database and the serving workers (HealthMonitor), reflection, the auth
// interceptor, keepalive, message-size and thread limits on one grpc::Server (or two: the worker
// protocol on its own listener, options.worker_listen), the blob garbage collector, the
// Prometheus /metrics endpoint (options.metrics_listen) and the HTTP API with the web app
// (options.http.listen).
#ifndef GANTRY_SERVER_GANTRY_SERVER_H_
#define GANTRY_SERVER_GANTRY_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/metrics/metrics_http_server.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "server/api/admin_service.h"
#include "server/api/catalog_service.h"
#include "server/api/dataset_service.h"
#include "server/api/study_service.h"
#include "server/api/training_service.h"
#include "server/api/worker_dataset_service.h"
#include "server/api/worker_service.h"
#include "scheduler/generation_router.h"
#include "server/coordinator/job_coordinator.h"
#include "server/coordinator/job_submitter.h"
#include "server/coordinator/server_metrics_collector.h"
#include "server/coordinator/study_driver.h"
#include "server/gateway/generation_service.h"
#include "server/gateway/model_export_proxy.h"
#include "server/gateway/model_pinner.h"
#include "server/http/http_api_server.h"
#include "server/platform/backend.h"
#include "server/platform/blob_collector.h"
#include "server/platform/health_monitor.h"
#include "server/platform/server_options.h"
#include "server/platform/stream_pump.h"
#include "server/platform/stream_watchdog.h"
#include "server/pools/pool_autoscaler.h"
#include "storage/database.h"

namespace gantry::server {

// Start() returns a serving server; Shutdown() may be called from any thread, once.
class GantryServer {
 public:
  // Connects to the database (applying migrations), binds options.listen and, when given,
  // options.worker_listen (both with TLS when cert and key are given) and starts serving; health
  // statuses are set by a first HealthMonitor check before it returns and follow the database and
  // the workers every options.health_check_interval.
  static absl::StatusOr<std::unique_ptr<GantryServer>> Start(const ServerOptions& options);
  ~GantryServer();

  // "host:port" actually bound (port resolved when options.listen asked for port 0).
  const std::string& address() const { return address_; }
  // "host:port" of the worker listener actually bound; empty when options.worker_listen is empty
  // (workers then use address()).
  const std::string& worker_address() const { return worker_address_; }
  // "host:port" of the /metrics endpoint; empty when options.metrics_listen is empty.
  std::string metrics_address() const {
    return metrics_http_ != nullptr ? metrics_http_->address() : std::string();
  }
  // "host:port" of the HTTP API; empty when options.http.listen is empty.
  std::string http_address() const { return http_ != nullptr ? http_->address() : std::string(); }
  int migrations_applied() const { return backend_->migrations_applied; }

  // Marks health NOT_SERVING, ends streams and waits up to options.shutdown_grace for calls on
  // every listener to finish, then cancels the rest.
  void Shutdown();
  // Blocks until the server has shut down.
  void Wait();

 private:
  explicit GantryServer(std::unique_ptr<Backend> backend);
  // The steps of Start after the backend: the gRPC listener(s) with their thread budgets, the
  // health monitor (on a database connection of its own), the HTTP API (when configured).
  absl::Status StartListeners(const ServerOptions& options,
                              std::shared_ptr<grpc::ServerCredentials> creds);
  absl::Status StartHealthMonitor(const ServerOptions& options);
  absl::Status StartHttpApi(const ServerOptions& options, const std::string& cert_pem,
                            const std::string& key_pem, const std::string& in_process_key);

  // What everything below is built from: each part gets the Backend's members it uses (the
  // Backend itself only as CallAuth and ModelResolver).
  std::unique_ptr<Backend> backend_;
  scheduler::GenerationRouter router_;  // fed by the coordinator, asked by the GenerationService
  JobCoordinator coordinator_;
  ModelPinner pinner_;         // AdminService.LoadModel, and keeping pins applied
  PoolAutoscaler autoscaler_;  // elastic pools
  // Runs the polls of WatchJob and WatchStudy streams (callback API); outlives both servers.
  static constexpr int kWatchPumpThreads = 4;
  StreamPump watch_pump_;
  // How jobs enter: TrainingService.SubmitJob, StudyService's checks, the study driver's trials.
  JobSubmitter submitter_;
  TrainingService training_;
  GenerationService generation_;
  ModelExportProxy exports_;  // CatalogService.ExportModel
  CatalogService catalog_;
  // Ends client streams (uploads) past their header or idle deadline; outlives datasets_'s calls.
  StreamWatchdog stream_watchdog_;
  DatasetService datasets_;
  WorkerService workers_;
  WorkerDatasetService worker_datasets_;  // ReadDataset alone, for the worker listener
  AdminService admin_;
  BlobCollector blob_collector_;
  // Every call's authentication result, whichever listener took it; outlives both servers.
  std::unique_ptr<AuthInterceptorFactory> auth_;
  StudyService studies_;
  StudyDriver study_driver_;  // submits and follows the trials of stored studies
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  // The worker listener (options.worker_listen); null when the main listener serves workers too.
  std::unique_ptr<grpc::Server> worker_server_;
  std::string worker_address_;
  // The health monitor's own one-connection pool (short timeouts; never waits behind busy calls).
  std::unique_ptr<storage::Database> health_db_;
  std::unique_ptr<HealthMonitor> health_;  // sets statuses on server_ and worker_server_
  // The scrape-time gauges of this server, and the endpoint: destroyed first.
  std::unique_ptr<ServerMetricsCollector> metrics_collector_;
  std::unique_ptr<metrics::MetricsHttpServer> metrics_http_;
  // The HTTP API (calls the services above through server_'s in-process channel); stopped in
  // Shutdown once the gRPC server has ended its calls.
  std::unique_ptr<http::HttpApiServer> http_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_GANTRY_SERVER_H_
