#include "base/metrics/metrics_http_server.h"

#include <utility>

#include "base/metrics/prometheus_text.h"
#include "httplib.h"

namespace gantry::metrics {
namespace {

// Scrapes are rare and small: two handler threads are plenty, and bound the cost of a flood.
constexpr int kHandlerThreads = 2;

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    absl::string_view address, absl::string_view flag, MetricsRegistry* registry) {
  auto http = std::make_unique<httplib::Server>();
  http->set_read_timeout(5, 0);
  http->set_write_timeout(5, 0);
  http->set_payload_max_length(0);  // GET only: no request body is read
  http->Get("/metrics", [registry](const httplib::Request&, httplib::Response& response) {
    response.set_content(registry->Render(), kPrometheusTextContentType);
  });
  http->set_error_handler([](const httplib::Request&, httplib::Response& response) {
    if (response.status == 404) {
      response.set_content("not found: metrics are at /metrics\n", "text/plain");
    }
  });
  HttpListenerOptions options;
  options.address = std::string(address);
  options.flag = std::string(flag);
  options.handler_threads = kHandlerThreads;
  absl::StatusOr<std::unique_ptr<HttpListener>> listener =
      HttpListener::Start(std::move(http), options);
  if (!listener.ok()) return listener.status();
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(*std::move(listener)));
}

}  // namespace gantry::metrics
