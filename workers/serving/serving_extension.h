// ServingExtension: generation serving as a part of the worker daemon: runs the gRPC server of
// WorkerGenerationService on advertise_host:--serve-port, registers its endpoint and a random
// per-process secret, and reports loaded models and load in every heartbeat. Torch-free: the
// model loader is injected (the daemon's fetches checkpoints and loads them with LibTorch).
#ifndef GANTRY_WORKERS_SERVING_SERVING_EXTENSION_H_
#define GANTRY_WORKERS_SERVING_SERVING_EXTENSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "workers/agent/daemon_main.h"
#include "workers/serving/model_cache.h"
#include "workers/serving/worker_generation_service.h"

namespace gantry::serving {

class ServingExtension final : public agent::DaemonExtension {
 public:
  // Uses advertise_host, serve_port (>= 0), max_batch_size, max_queue_delay_ms,
  // max_queued_requests, model_cache_bytes and tls (TLS with its certificate when it has one) of
  // `options`. `exporter` serves Export (null: UNIMPLEMENTED).
  ServingExtension(const agent::AgentOptions& options, ModelLoader loader,
                   ModelExporter exporter = nullptr);
  ~ServingExtension() override;

  // StartServer, then adds the register source (generation_endpoint, generation_secret), the
  // heartbeat source (loaded_models, generation_active_requests, generation_queued_showers) and
  // the collector of the loaded-model gauges of the process's /metrics page.
  absl::Status Start(agent::WorkerAgent& agent) override;
  // Stops the server (calls in flight end with UNAVAILABLE after a short grace).
  void Stop() override;

  // Binds and starts the gRPC server; UNAVAILABLE naming the address when the port is taken.
  absl::Status StartServer();
  // "host:port" once started.
  const std::string& endpoint() const { return endpoint_; }
  int port() const { return port_; }
  const std::string& secret() const { return secret_; }
  ModelCache& cache() { return *cache_; }
  void FillRegister(gantry::v1::RegisterRequest& request) const;
  void FillHeartbeat(gantry::v1::Heartbeat& heartbeat) const;

 private:
  const std::string host_;
  const TlsConfig tls_;  // with a certificate: the endpoint serves TLS
  const int requested_port_;
  const int64_t model_cache_limit_;  // --model-cache-bytes
  const std::string secret_;
  std::unique_ptr<ModelCache> cache_;
  std::unique_ptr<WorkerGenerationService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string endpoint_;
  int port_ = 0;
  int64_t metrics_collector_ = 0;  // in metrics::ProcessMetrics(); 0 = none
};

// 64 hex digits from the system's random source.
std::string RandomSecret();

// The factory DaemonMain takes: nullptr when --serve-port=-1, else a ServingExtension whose loader
// (and exporter, when `make_exporter` is given) is made from the resolved options.
agent::DaemonExtensionFactory ServingExtensionFactory(
    std::function<ModelLoader(const agent::AgentOptions&)> make_loader,
    std::function<ModelExporter(const agent::AgentOptions&)> make_exporter = nullptr);

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_SERVING_EXTENSION_H_
