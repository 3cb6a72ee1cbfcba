// HttpApiServer: the HTTP listener of gantry-server (--http-listen): the JSON API of docs/API.md
// "HTTP API" (browser sessions, CSRF-checked writes, the catalog, jobs with Server-Sent Events,
// generation as an HDF5 download) and the web app's static files (--web-root). Every API route
// calls the gantry.v1 services through the gRPC server's in-process channel, authenticated with
// the browser session, so validation, status codes and tenant isolation are those of gRPC.
#ifndef GANTRY_SERVER_HTTP_HTTP_API_SERVER_H_
#define GANTRY_SERVER_HTTP_HTTP_API_SERVER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/http/http_server.h"
#include "gantry/v1/catalog.grpc.pb.h"
#include "gantry/v1/generation.grpc.pb.h"
#include "gantry/v1/training.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "server/http/static_files.h"
#include "server/platform/auth.h"
#include "server/platform/call_auth.h"
#include "storage/job_repository.h"
#include "storage/web_session_repository.h"

namespace gantry::server::http {

struct HttpApiOptions {
  std::string listen;    // host:port (port 0 picks a free one)
  std::string web_root;  // the built web app; empty = API only
  // Both set: HTTPS with this certificate chain and key (PEM text, the gRPC listener's), and the
  // session cookie gets `Secure`.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  absl::Duration session_ttl = absl::Hours(12);
  // The most showers one POST /api/v1/generate may ask for (INVALID_ARGUMENT above).
  int64_t max_generate_showers = 2000;
  // Where generated HDF5 files are written before they are sent (emptied at start).
  std::string temp_dir;
  // Sent as kHttpApiKeyMetadata on every in-process call (see AuthInterceptorFactory).
  std::string in_process_key;
  // Threads that run requests; a request waits for one only once it has fully arrived, so slow
  // clients hold none (the listener's event loop reads and writes every connection).
  int handler_threads = 16;
  // Open connections, in all and from one address (raise the latter behind a reverse proxy).
  int max_connections = 512;
  int max_connections_per_ip = 64;
  // Concurrent Server-Sent Event streams (each holds a handler thread), server-wide and per
  // tenant, so that one tenant cannot take them all; 429 above either.
  int max_event_streams = 8;
  int max_event_streams_per_tenant = 2;
  // A comment line is sent on an idle event stream this often, so a closed browser tab is noticed.
  absl::Duration event_keepalive = absl::Seconds(15);
};

// Start() returns a listening server; the destructor stops it (waiting for running requests,
// whose gRPC calls end when the gRPC server shuts down). Thread-safe.
class HttpApiServer {
 public:
  // Browser sessions are opened and closed in `web_sessions` and checked with `verify_token` (the
  // tenant audience); closing one clears `auth`'s token cache. Job event streams read `jobs`.
  // Every reference must outlive the server; `channel` is the gRPC server's in-process channel.
  static absl::StatusOr<std::unique_ptr<HttpApiServer>> Start(
      const HttpApiOptions& options, CallAuth& auth, TokenVerifier verify_token,
      storage::WebSessionRepository& web_sessions, storage::JobRepository& jobs,
      std::shared_ptr<grpc::Channel> channel);
  ~HttpApiServer();

  // "host:port" actually bound.
  const std::string& address() const { return listener_->address(); }

 private:
  HttpApiServer(const HttpApiOptions& options, CallAuth& auth, TokenVerifier verify_token,
                storage::WebSessionRepository& web_sessions, storage::JobRepository& jobs,
                std::shared_ptr<grpc::Channel> channel);
  // POST, GET and DELETE /api/v1/session: log in, the session's CSRF token, log out.
  void AddSessionRoutes(HttpRouter& http);
  void AddRoutes(HttpRouter& http);
  // A context for an in-process call on behalf of the session `secret`.
  std::unique_ptr<grpc::ClientContext> ContextFor(const std::string& secret,
                                                  absl::Duration timeout) const;

  // The session secret of an API request, or false after answering 401 (no or bad session), 403
  // (a write without the session's X-CSRF-Token) or 415 (a body that is not JSON).
  bool RequireSession(const HttpRequest& request, HttpResponse& response, std::string* secret);
  void Login(const HttpRequest& request, HttpResponse& response);
  void ServeJobEvents(const HttpRequest& request, HttpResponse& response, const std::string& secret,
                      const std::string& job_id);
  void StreamJobEvents(const std::string& secret, const gantry::v1::WatchJobRequest& watch,
                       HttpStream& sink);
  void ServeJobMetrics(const HttpRequest& request, HttpResponse& response,
                       const std::string& secret, const std::string& job_id);
  void Generate(const HttpRequest& request, HttpResponse& response, const std::string& secret);
  void ServeStatic(const HttpRequest& request, HttpResponse& response);

  const HttpApiOptions options_;
  CallAuth& auth_;
  const TokenVerifier verify_token_;
  storage::WebSessionRepository& web_sessions_;
  storage::JobRepository& jobs_;
  const bool secure_cookies_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<gantry::v1::CatalogService::Stub> catalog_;
  std::unique_ptr<gantry::v1::TrainingService::Stub> training_;
  std::unique_ptr<gantry::v1::GenerationService::Stub> generation_;
  std::unique_ptr<StaticFiles> static_files_;  // null without a web root
  // Takes one of the event streams for `tenant`; RESOURCE_EXHAUSTED (naming the limit) when the
  // server or the tenant has none left. ReleaseEventStream gives it back.
  absl::Status TakeEventStream(const std::string& tenant);
  void ReleaseEventStream(const std::string& tenant);

  absl::Mutex event_streams_mu_;
  int event_streams_ ABSL_GUARDED_BY(event_streams_mu_) = 0;
  std::map<std::string, int> tenant_event_streams_ ABSL_GUARDED_BY(event_streams_mu_);
  std::atomic<uint64_t> downloads_{0};  // names temporary files
  // Last: destroyed first, so running requests end before what they use goes away.
  std::unique_ptr<HttpServer> listener_;
};

// The web app folder the build installs next to the server (<build>/web for
// <build>/server/gantry-server) when it holds index.html; empty otherwise.
std::string DefaultWebRoot();

}  // namespace gantry::server::http

#endif  // GANTRY_SERVER_HTTP_HTTP_API_SERVER_H_
