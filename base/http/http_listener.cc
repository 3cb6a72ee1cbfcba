#include "base/http/http_listener.h"

#include <sys/socket.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/http/listen_address.h"
#include "httplib.h"

namespace gantry {

HttpListener::HttpListener(std::unique_ptr<httplib::Server> server) : server_(std::move(server)) {}

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(
    std::unique_ptr<httplib::Server> server, const HttpListenerOptions& options) {
  absl::StatusOr<HostPort> host_port = ParseListenAddress(options.address, options.flag);
  if (!host_port.ok()) return host_port.status();
  const int threads = options.handler_threads > 0 ? options.handler_threads : 1;
  server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let a second process bind
  // the same port silently instead of failing with "address in use".
  server->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  int port = host_port->port;
  bool bound = false;
  if (port == 0) {
    port = server->bind_to_any_port(host_port->host);
    bound = port > 0;
  } else {
    bound = server->bind_to_port(host_port->host, port);
  }
  if (!bound) {
    return absl::UnavailableError(
        absl::StrCat(options.flag, ": cannot listen on ", options.address,
                     " (address in use, or not an address of this host)"));
  }
  std::unique_ptr<HttpListener> listener(new HttpListener(std::move(server)));
  listener->address_ = FormatHostPort(host_port->host, port);
  HttpListener* self = listener.get();
  listener->thread_ = std::thread([self] {
    self->server_->listen_after_bind();
    self->finished_ = true;
  });
  return listener;
}

HttpListener::~HttpListener() {
  if (!thread_.joinable()) return;
  // stop() only takes effect once the loop runs: wait for it (or for its early end).
  while (!server_->is_running() && !finished_) absl::SleepFor(absl::Milliseconds(1));
  server_->stop();
  thread_.join();
}

}  // namespace gantry
