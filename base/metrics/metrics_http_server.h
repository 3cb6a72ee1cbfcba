// MetricsHttpServer: serves a MetricsRegistry as `GET /metrics` (Prometheus text format 0.0.4)
// on its own small HTTP listener (base/http), apart from the gRPC port.
#ifndef GANTRY_BASE_METRICS_METRICS_HTTP_SERVER_H_
#define GANTRY_BASE_METRICS_METRICS_HTTP_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/http/http_server.h"
#include "base/metrics/metrics_registry.h"

namespace gantry::metrics {

// Thread-safe. The registry must outlive the server. GET and HEAD of /metrics are served; any
// other path or method answers 404.
class MetricsHttpServer {
 public:
  // Listens on `address` (HOST:PORT, as gantry::ParseListenAddress) and serves from a thread of its
  // own. INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(absl::string_view address,
                                                                  absl::string_view flag,
                                                                  MetricsRegistry* registry);
  // Destroying it stops listening and joins the thread.

  // HOST:PORT actually bound (the port filled in when 0 was asked for).
  const std::string& address() const { return listener_->address(); }

 private:
  explicit MetricsHttpServer(std::unique_ptr<HttpServer> listener)
      : listener_(std::move(listener)) {}

  std::unique_ptr<HttpServer> listener_;
};

}  // namespace gantry::metrics

#endif  // GANTRY_BASE_METRICS_METRICS_HTTP_SERVER_H_
