// HttpListener: runs a configured cpp-httplib server on a HOST:PORT of its own thread, and stops
// it. The one place that binds (port 0 picks a free port), listens and joins an HTTP endpoint.
#ifndef GANTRY_BASE_HTTP_HTTP_LISTENER_H_
#define GANTRY_BASE_HTTP_HTTP_LISTENER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace httplib {
class Server;
}

namespace gantry {

struct HttpListenerOptions {
  std::string address;  // HOST:PORT, as ParseListenAddress
  std::string flag;     // names the address in errors, e.g. "--metrics-listen"
  int handler_threads = 2;
};

// Owns the server. Thread-safe: the routes run on the server's handler threads.
class HttpListener {
 public:
  // Sets the handler pool and SO_REUSEADDR-only sockets on `server` (whose routes and timeouts
  // the caller has set), binds it and serves from a thread of its own. INVALID_ARGUMENT for a
  // malformed address, UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(
      std::unique_ptr<httplib::Server> server, const HttpListenerOptions& options);
  ~HttpListener();  // stops listening, waits for running requests, joins the thread
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // HOST:PORT actually bound (the port filled in when 0 was asked for).
  const std::string& address() const { return address_; }

 private:
  explicit HttpListener(std::unique_ptr<httplib::Server> server);

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> finished_{false};  // the listening loop returned
  std::string address_;
};

}  // namespace gantry

#endif  // GANTRY_BASE_HTTP_HTTP_LISTENER_H_
