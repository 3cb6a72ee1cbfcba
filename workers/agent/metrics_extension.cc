#include "workers/agent/metrics_extension.h"

#include <utility>

#include "base/log.h"
#include "base/metrics/metrics_registry.h"

namespace gantry::agent {

absl::Status MetricsExtension::Start(WorkerAgent&) {
  absl::StatusOr<std::unique_ptr<metrics::MetricsHttpServer>> http =
      metrics::MetricsHttpServer::Start(listen_, "--metrics-listen", &metrics::ProcessMetrics());
  if (!http.ok()) return http.status();
  http_ = *std::move(http);
  GANTRY_LOG(INFO) << "metrics on http://" << http_->address() << "/metrics";
  return absl::OkStatus();
}

void MetricsExtension::Stop() { http_.reset(); }

DaemonExtensionFactory MetricsExtensionFactory(std::string listen) {
  return [listen = std::move(listen)](
             const AgentOptions&) -> absl::StatusOr<std::unique_ptr<DaemonExtension>> {
    if (listen.empty()) return std::unique_ptr<DaemonExtension>();
    return std::unique_ptr<DaemonExtension>(new MetricsExtension(listen));
  };
}

}  // namespace gantry::agent
