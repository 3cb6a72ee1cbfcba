// MetricsHttpServer: serves a MetricsRegistry as `GET /metrics` (Prometheus text format 0.0.4)
// on its own small HTTP listener (cpp-httplib), apart from the gRPC port.
#ifndef GANTRY_BASE_METRICS_METRICS_HTTP_SERVER_H_
#define GANTRY_BASE_METRICS_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/metrics/metrics_registry.h"

namespace httplib {
class Server;
}

namespace gantry::metrics {

// A listen address split into host and port ("[::1]:9100" -> "::1", 9100).
struct HostPort {
  std::string host;
  int port = 0;
};
// INVALID_ARGUMENT naming `flag` and the expected HOST:PORT form (port 0..65535; 0 picks one).
absl::StatusOr<HostPort> ParseListenAddress(absl::string_view address, absl::string_view flag);

// Thread-safe. The registry must outlive the server. GET and HEAD of /metrics are served; any
// other path or method answers 404.
class MetricsHttpServer {
 public:
  // Listens on `address` (HOST:PORT, as ParseListenAddress) and serves from a thread of its own.
  // INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(absl::string_view address,
                                                                  absl::string_view flag,
                                                                  MetricsRegistry* registry);
  ~MetricsHttpServer();  // stops listening and joins the thread
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // HOST:PORT actually bound (the port filled in when 0 was asked for).
  const std::string& address() const { return address_; }

 private:
  MetricsHttpServer() = default;

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::atomic<bool> finished_{false};  // the listening loop returned
  std::string address_;
};

}  // namespace gantry::metrics

#endif  // GANTRY_BASE_METRICS_METRICS_HTTP_SERVER_H_
