#include "base/metrics/metrics_http_server.h"

#include <utility>

#include "base/metrics/prometheus_text.h"

namespace gantry::metrics {
namespace {

// Scrapes are rare and small: two handler threads are plenty, and bound the cost of a flood.
constexpr int kHandlerThreads = 2;

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    absl::string_view address, absl::string_view flag, MetricsRegistry* registry) {
  auto routes = std::make_unique<HttpRouter>();
  routes->Get("/metrics", [registry](const HttpRequest&, HttpResponse& response) {
    response.set_content(registry->Render(), kPrometheusTextContentType);
  });
  routes->set_error_handler([](const HttpRequest&, HttpResponse& response) {
    if (response.status == 404) {
      response.set_content("not found: metrics are at /metrics\n", "text/plain");
    }
  });
  HttpServerOptions options;
  options.address = std::string(address);
  options.flag = std::string(flag);
  options.handler_threads = kHandlerThreads;
  options.max_body_bytes = 0;  // GET only: a request with a body is refused
  options.idle_timeout = absl::Seconds(5);
  options.stream_write_timeout = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<HttpServer>> listener =
      HttpServer::Start(std::move(routes), options);
  if (!listener.ok()) return listener.status();
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(*std::move(listener)));
}

}  // namespace gantry::metrics
