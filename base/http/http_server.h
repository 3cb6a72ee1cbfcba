// HttpServer: gantry's HTTP/1.1 listener (the server's HTTP API and web app, the /metrics
// endpoints), on GNU libmicrohttpd. One event-loop thread does every socket read and write; a
// bounded pool of handler threads runs the routes. A connection costs a bounded buffer and no
// thread until its request is complete, so slow or silent clients cannot hold the handlers:
//   - request line and headers share one per-connection buffer (`connection_memory_bytes`); more is
//     refused (431/414) and the connection closed;
//   - a body above `max_body_bytes` is refused with 413 before it is read;
//   - a connection that sends or takes nothing for `idle_timeout` is closed;
//   - at most `max_connections` connections, `max_connections_per_ip` from one address;
//   - at most `max_queued_requests` complete requests wait for a handler; above it 503.
// Responses are a body, a file descriptor (sent by the event loop) or a stream produced on the
// handler thread (chunked; see HttpStream).
#ifndef GANTRY_BASE_HTTP_HTTP_SERVER_H_
#define GANTRY_BASE_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gantry {

// One request, complete (body included) when a handler sees it.
struct HttpRequest {
  std::string method;  // "GET", "HEAD", "POST", ...
  std::string path;    // percent-decoded, without the query ("%00" is left encoded)
  std::multimap<std::string, std::string> params;            // decoded query, repeated names kept
  std::vector<std::pair<std::string, std::string>> headers;  // as received, in order
  std::string body;
  std::vector<std::string> matches;  // the route's regex: [0] the path, [1..] its groups

  // The first header of that name (ASCII case-insensitive), or "" when there is none.
  std::string header(absl::string_view name) const;
  bool has_param(absl::string_view name) const { return params.count(std::string(name)) > 0; }
  // The first value of a query parameter, or "".
  std::string param(absl::string_view name) const;
};

// Written by a streamed response's producer on its handler thread.
class HttpStream {
 public:
  virtual ~HttpStream() = default;
  // Queues `data` for the client. Blocks while more than a bounded amount waits unsent; false once
  // the client is gone, the server stops, or the client took nothing for the write timeout (the
  // producer should then end).
  virtual bool Write(absl::string_view data) = 0;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Set: the body is produced by this function, on the handler thread, after the status and
  // headers are sent (chunked transfer, no Content-Length). It always runs once, even when the
  // client has gone by then (its writes then fail).
  std::function<void(HttpStream&)> stream;
  // >= 0: the body is this file's first `file_size` bytes, sent by the event loop; the server
  // closes the descriptor (also when the response is dropped).
  int file_fd = -1;
  uint64_t file_size = 0;

  HttpResponse() = default;
  HttpResponse(const HttpResponse&) = delete;
  HttpResponse& operator=(const HttpResponse&) = delete;
  ~HttpResponse();

  // Sets (replaces) a header.
  void set_header(absl::string_view name, absl::string_view value);
  std::string header(absl::string_view name) const;
  void set_content(std::string content, absl::string_view content_type);
};

// Routes by method and a regex matched against the whole path (HEAD is routed as GET). Built
// before the server starts; read-only afterwards.
class HttpRouter {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;

  void Get(const std::string& pattern, Handler handler) { Add("GET", pattern, std::move(handler)); }
  void Post(const std::string& pattern, Handler handler) {
    Add("POST", pattern, std::move(handler));
  }
  void Put(const std::string& pattern, Handler handler) { Add("PUT", pattern, std::move(handler)); }
  void Delete(const std::string& pattern, Handler handler) {
    Add("DELETE", pattern, std::move(handler));
  }
  // Runs first, on the handler thread (e.g. to start a per-request log record).
  void set_before(Handler before) { before_ = std::move(before); }
  // Runs after the handler (before a streamed body), on the same thread.
  void set_logger(std::function<void(const HttpRequest&, const HttpResponse&)> logger) {
    logger_ = std::move(logger);
  }
  // Fills in an error answer without a body: the router's 404 and 500 and the listener's own
  // 413 and 503 (those on the event loop: keep it cheap).
  void set_error_handler(Handler error_handler) { error_handler_ = std::move(error_handler); }
  // Headers added to every answer, the listener's own included (unless the answer sets them).
  void set_default_headers(std::vector<std::pair<std::string, std::string>> headers) {
    default_headers_ = std::move(headers);
  }

  // What the server answers to `request` (its matches filled in): before, the route (404 without
  // one, 500 when it throws), the error handler, the logger.
  void Handle(HttpRequest& request, HttpResponse& response) const;
  // The error handler alone, for answers the listener gives itself.
  void FillError(const HttpRequest& request, HttpResponse& response) const;
  const std::vector<std::pair<std::string, std::string>>& default_headers() const {
    return default_headers_;
  }

 private:
  struct Route {
    std::string method;
    std::regex pattern;
    Handler handler;
  };
  void Add(const std::string& method, const std::string& pattern, Handler handler);

  std::vector<Route> routes_;
  Handler before_;
  std::function<void(const HttpRequest&, const HttpResponse&)> logger_;
  Handler error_handler_;
  std::vector<std::pair<std::string, std::string>> default_headers_;
};

struct HttpServerOptions {
  std::string address;  // HOST:PORT, as ParseListenAddress (port 0 picks a free one)
  std::string flag;     // names the address in errors, e.g. "--metrics-listen"
  // Both set: HTTPS (TLS) with this certificate chain and key (PEM text, as LoadTlsConfig read
  // and checked it once for every listener of the process).
  std::string tls_cert_pem;
  std::string tls_key_pem;
  int handler_threads = 2;
  int max_queued_requests = 64;
  size_t max_body_bytes = 1 << 20;
  size_t connection_memory_bytes = 32 << 10;
  absl::Duration idle_timeout = absl::Seconds(30);
  // A request (line, headers and body) must arrive whole within this time of its connection's
  // start, or of the previous answer on a kept-alive connection; else the connection is closed.
  // Bounds how long a client that trickles bytes (one every idle_timeout) holds a connection.
  absl::Duration request_timeout = absl::Seconds(30);
  // A streamed response whose client takes nothing for this long ends (HttpStream::Write false).
  absl::Duration stream_write_timeout = absl::Seconds(60);
  int max_connections = 512;
  int max_connections_per_ip = 64;
};

// Listens until destroyed. Thread-safe.
class HttpServer {
 public:
  // Binds (SO_REUSEADDR only, so a port in use fails) and serves. INVALID_ARGUMENT for a
  // malformed address or option, or TLS files that cannot be loaded; UNAVAILABLE when the
  // address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(std::unique_ptr<HttpRouter> router,
                                                           const HttpServerOptions& options);
  // Stops accepting, lets running handlers and streams end (a stream's next write fails), closes
  // every connection.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // HOST:PORT actually bound (the port filled in when 0 was asked for).
  const std::string& address() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry

#endif  // GANTRY_BASE_HTTP_HTTP_SERVER_H_
