#include "base/metrics/metrics_http_server.h"

#include <sys/socket.h>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/metrics/prometheus_text.h"
#include "httplib.h"

namespace gantry::metrics {
namespace {

// Scrapes are rare and small: two handler threads are plenty, and bound the cost of a flood.
constexpr int kHandlerThreads = 2;

}  // namespace

absl::StatusOr<HostPort> ParseListenAddress(absl::string_view address, absl::string_view flag) {
  const auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", why, " in \"", address,
                                                   "\"; expected HOST:PORT, e.g. 127.0.0.1:9100 "
                                                   "or [::1]:9100 (port 0 picks a free one)"));
  };
  HostPort result;
  absl::string_view port_text;
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return invalid("an IPv6 host needs [HOST]:PORT");
    }
    result.host = std::string(address.substr(1, close - 1));
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) return invalid("no port");
    result.host = std::string(address.substr(0, colon));
    port_text = address.substr(colon + 1);
    if (result.host.find(':') != std::string::npos) {
      return invalid("an IPv6 host must be in brackets");
    }
  }
  if (result.host.empty()) return invalid("no host");
  if (!absl::SimpleAtoi(port_text, &result.port) || result.port < 0 || result.port > 65535) {
    return invalid("the port is not a number from 0 to 65535");
  }
  return result;
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    absl::string_view address, absl::string_view flag, MetricsRegistry* registry) {
  absl::StatusOr<HostPort> host_port = ParseListenAddress(address, flag);
  if (!host_port.ok()) return host_port.status();
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->http_ = std::make_unique<httplib::Server>();
  httplib::Server& http = *server->http_;
  http.new_task_queue = [] { return new httplib::ThreadPool(kHandlerThreads); };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let a second process bind
  // the same port silently instead of failing with "address in use".
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.set_read_timeout(5, 0);
  http.set_write_timeout(5, 0);
  http.set_payload_max_length(0);  // GET only: no request body is read
  http.Get("/metrics", [registry](const httplib::Request&, httplib::Response& response) {
    response.set_content(registry->Render(), kPrometheusTextContentType);
  });
  http.set_error_handler([](const httplib::Request&, httplib::Response& response) {
    if (response.status == 404) {
      response.set_content("not found: metrics are at /metrics\n", "text/plain");
    }
  });
  int port = host_port->port;
  bool bound = false;
  if (port == 0) {
    port = http.bind_to_any_port(host_port->host);
    bound = port > 0;
  } else {
    bound = http.bind_to_port(host_port->host, port);
  }
  if (!bound) {
    return absl::UnavailableError(absl::StrCat(
        flag, ": cannot listen on ", address, " (address in use, or not an address of this host)"));
  }
  const bool bracket = host_port->host.find(':') != std::string::npos;
  server->address_ = bracket ? absl::StrCat("[", host_port->host, "]:", port)
                             : absl::StrCat(host_port->host, ":", port);
  MetricsHttpServer* self = server.get();
  server->thread_ = std::thread([self] {
    self->http_->listen_after_bind();
    self->finished_ = true;
  });
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (!thread_.joinable()) return;  // never listened (Start failed)
  // stop() only takes effect once the loop runs: wait for it (or for its early end).
  while (!http_->is_running() && !finished_) absl::SleepFor(absl::Milliseconds(1));
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gantry::metrics
