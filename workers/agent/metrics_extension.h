// MetricsExtension: the worker daemon's /metrics endpoint (--metrics-listen) as a part of the
// daemon: serves metrics::ProcessMetrics() (ranks, dataset cache, generation) over HTTP.
#ifndef GANTRY_WORKERS_AGENT_METRICS_EXTENSION_H_
#define GANTRY_WORKERS_AGENT_METRICS_EXTENSION_H_

#include <memory>
#include <string>

#include "base/metrics/metrics_http_server.h"
#include "workers/agent/daemon_main.h"

namespace gantry::agent {

class MetricsExtension final : public DaemonExtension {
 public:
  explicit MetricsExtension(std::string listen) : listen_(std::move(listen)) {}

  // Listens on the address (UNAVAILABLE naming --metrics-listen when it cannot be bound).
  absl::Status Start(WorkerAgent& agent) override;
  void Stop() override;

 private:
  const std::string listen_;
  std::unique_ptr<metrics::MetricsHttpServer> http_;
};

// The factory DaemonMain takes: nullptr (no endpoint) when `listen` is empty.
DaemonExtensionFactory MetricsExtensionFactory(std::string listen);

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_METRICS_EXTENSION_H_
