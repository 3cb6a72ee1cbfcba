#include "server/http/http_api_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/executable_dir.h"
#include "base/grpc_status.h"
#include "base/json_string.h"
#include "base/log.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "server/http/http_errors.h"
#include "server/http/json_printer.h"
#include "server/http/query_requests.h"
#include "server/http/session_cookie.h"
#include "server/http/shower_download.h"
#include "showers/stream/generate_chunk.h"

namespace gantry::server::http {
namespace {

namespace v1 = ::gantry::v1;

// Unary calls give up after this; a Generate download after kGenerateTimeout.
constexpr absl::Duration kCallTimeout = absl::Seconds(30);
constexpr absl::Duration kGenerateTimeout = absl::Minutes(10);
// Request bodies (JSON requests) above this are refused by the listener with 413.
constexpr size_t kMaxBodyBytes = 1 << 20;
// Job metrics: events read at most, and points returned at most (evenly thinned above it).
constexpr int kMaxMetricEventsScanned = 200000;
constexpr size_t kMaxMetricPoints = 5000;

// The strict policy of every response: only this origin's scripts, styles, images and API.
constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'";

// The tenant and start time of the request running on this handler thread, for its log line
// (the listener calls the logger on the thread that ran the handler).
thread_local std::string request_tenant;
thread_local absl::Time request_start;

std::string ToJson(const google::protobuf::Message& message) { return ProtoToJson(message); }

void ReplyError(HttpResponse& response, const absl::Status& status) {
  response.status = HttpStatusOf(status.code());
  response.set_content(ErrorJson(status), "application/json");
}

void ReplyJson(HttpResponse& response, std::string json) {
  response.status = 200;
  response.set_content(std::move(json), "application/json");
}

// A request body as a gantry.v1 message (protobuf JSON mapping, unknown fields refused). An empty
// body is the empty message.
absl::Status ParseBody(const HttpRequest& request, google::protobuf::Message* message) {
  if (request.body.empty()) return absl::OkStatus();
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(request.body, message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the request body is not a JSON ",
                                                   message->GetDescriptor()->name(), ": ",
                                                   std::string(status.message()).substr(0, 200)));
  }
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<grpc::ClientContext> HttpApiServer::ContextFor(const std::string& secret,
                                                               absl::Duration timeout) const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->AddMetadata("authorization", absl::StrCat("Bearer ", secret));
  context->AddMetadata(kHttpApiKeyMetadata, options_.in_process_key);
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

namespace {

QueryParams ParamsOf(const HttpRequest& request) {
  return QueryParams(request.params.begin(), request.params.end());
}

// A download's file name: the model reference reduced to [A-Za-z0-9_.-].
std::string DownloadName(const std::string& model_ref, int64_t showers) {
  std::string name;
  for (char c : model_ref.substr(0, 100)) {
    name += absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ? c : '-';
  }
  return absl::StrCat(name.empty() ? "showers" : name, "-", showers, ".h5");
}

// The count of showers a GenerateRequest asks for.
int64_t RequestedShowers(const v1::GenerateRequest& request) {
  if (request.has_list()) return request.list().items_size();
  if (request.has_range()) return request.range().count();
  return 0;
}

// The reply type of a stub's unary method.
template <typename Method>
struct ReplyOf;
template <typename Stub, typename Request, typename Reply>
struct ReplyOf<grpc::Status (Stub::*)(grpc::ClientContext*, const Request&, Reply*)> {
  using type = Reply;
};

// A reply shown as it is.
struct AsIs {
  template <typename Message>
  const Message& operator()(const Message& message) const {
    return message;
  }
};

// The request of each unary route, from its path (request.matches), query and JSON body.
template <typename Request>
absl::StatusOr<Request> ModelInPath(const HttpRequest& request) {
  Request call;
  call.set_model(request.matches[1]);
  return call;
}

absl::StatusOr<v1::GetJobRequest> JobInPath(const HttpRequest& request) {
  v1::GetJobRequest call;
  call.set_job_id(request.matches[1]);
  return call;
}

// GET /models and /models/{name}/versions: the query, restricted to the path's model name.
absl::StatusOr<v1::ListModelsRequest> ListModelsOf(const HttpRequest& request) {
  absl::StatusOr<v1::ListModelsRequest> list = ListModelsRequestFrom(ParamsOf(request));
  if (!list.ok() || request.matches.size() < 2) return list;
  const std::string name = request.matches[1];
  if (!list->name().empty() && list->name() != name) {
    return absl::InvalidArgumentError("name: the query names another model than the path");
  }
  list->set_name(name);
  return list;
}

// A JSON body whose `field` names what the path names: left out (set from the path) or equal.
template <typename Request>
absl::StatusOr<Request> BodyForPath(const HttpRequest& request, std::string* (Request::*field)(),
                                    const char* mismatch) {
  Request call;
  RETURN_IF_ERROR(ParseBody(request, &call));
  std::string* value = (call.*field)();
  if (!value->empty() && *value != request.matches[1]) {
    return absl::InvalidArgumentError(mismatch);
  }
  *value = request.matches[1];
  return call;
}

absl::StatusOr<v1::SetAliasRequest> SetAliasOf(const HttpRequest& request) {
  return BodyForPath(request, &v1::SetAliasRequest::mutable_name,
                     "name: the body names another model than the path; leave it out of the body");
}

absl::StatusOr<v1::DeleteAliasRequest> DeleteAliasOf(const HttpRequest& request) {
  v1::DeleteAliasRequest remove;
  remove.set_name(request.matches[1]);
  remove.set_alias(request.matches[2]);
  return remove;
}

absl::StatusOr<v1::SetTagsRequest> SetTagsOf(const HttpRequest& request) {
  return BodyForPath(
      request, &v1::SetTagsRequest::mutable_model,
      "model: the body names another version than the path; leave it out of the body");
}

absl::StatusOr<v1::ListJobsRequest> ListJobsOf(const HttpRequest& request) {
  return ListJobsRequestFrom(ParamsOf(request));
}

absl::StatusOr<v1::GetJobLogsRequest> JobLogsOf(const HttpRequest& request) {
  return GetJobLogsRequestFrom(ParamsOf(request), request.matches[1]);
}

// What the validation plots draw: the version's metrics (with their statistical floors),
// histograms per energy bin and the validation curve of its job.
v1::ModelVersion ValidationOf(const v1::ModelVersion& model) {
  v1::ModelVersion validation;
  validation.set_name(model.name());
  validation.set_version(model.version());
  *validation.mutable_metrics() = model.metrics();
  *validation.mutable_histograms() = model.histograms();
  *validation.mutable_validation_curve() = model.validation_curve();
  *validation.mutable_energy_range_gev() = model.energy_range_gev();
  validation.set_particle(model.particle());
  return validation;
}

}  // namespace

std::string DefaultWebRoot() {
  const std::string dir = ExecutableDir();  // <build>/server
  if (dir.empty()) return "";
  const std::string root = dir.substr(0, dir.find_last_of('/')) + "/web";  // <build>/web
  struct stat st;
  return stat((root + "/index.html").c_str(), &st) == 0 ? root : "";
}

HttpApiServer::HttpApiServer(const HttpApiOptions& options, CallAuth& auth,
                             TokenVerifier verify_token,
                             storage::WebSessionRepository& web_sessions,
                             storage::JobRepository& jobs, std::shared_ptr<grpc::Channel> channel)
    : options_(options),
      auth_(auth),
      verify_token_(std::move(verify_token)),
      web_sessions_(web_sessions),
      jobs_(jobs),
      secure_cookies_(!options.tls_cert_pem.empty() && !options.tls_key_pem.empty()),
      channel_(std::move(channel)),
      catalog_(v1::CatalogService::NewStub(channel_)),
      training_(v1::TrainingService::NewStub(channel_)),
      generation_(v1::GenerationService::NewStub(channel_)) {}

absl::StatusOr<std::unique_ptr<HttpApiServer>> HttpApiServer::Start(
    const HttpApiOptions& options, CallAuth& auth, TokenVerifier verify_token,
    storage::WebSessionRepository& web_sessions, storage::JobRepository& jobs,
    std::shared_ptr<grpc::Channel> channel) {
  std::unique_ptr<HttpApiServer> server(new HttpApiServer(options, auth, std::move(verify_token),
                                                          web_sessions, jobs, std::move(channel)));
  if (!options.web_root.empty()) {
    absl::StatusOr<std::unique_ptr<StaticFiles>> files =
        StaticFiles::Create(options.web_root, "--web-root");
    if (!files.ok()) return files.status();
    server->static_files_ = *std::move(files);
  }
  std::error_code error;
  std::filesystem::remove_all(options.temp_dir, error);  // downloads a crash left behind
  std::filesystem::create_directories(options.temp_dir, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot create ", options.temp_dir,
                                               " for generated downloads: ", error.message()));
  }
  auto routes = std::make_unique<HttpRouter>();
  routes->set_default_headers({{"Content-Security-Policy", kContentSecurityPolicy},
                               {"X-Content-Type-Options", "nosniff"},
                               {"X-Frame-Options", "DENY"},
                               {"Referrer-Policy", "no-referrer"},
                               {"Cache-Control", "no-store"}});
  server->AddRoutes(*routes);
  HttpServerOptions listen;
  listen.address = options.listen;
  listen.flag = "--http-listen";
  listen.handler_threads = options.handler_threads;
  listen.max_queued_requests = 4 * options.handler_threads;
  listen.max_body_bytes = kMaxBodyBytes;
  listen.idle_timeout = absl::Seconds(30);
  listen.max_connections = options.max_connections;
  listen.max_connections_per_ip = options.max_connections_per_ip;
  if (server->secure_cookies_) {
    listen.tls_cert_pem = options.tls_cert_pem;
    listen.tls_key_pem = options.tls_key_pem;
  }
  absl::StatusOr<std::unique_ptr<HttpServer>> listener =
      HttpServer::Start(std::move(routes), listen);
  if (!listener.ok()) return listener.status();
  server->listener_ = *std::move(listener);
  return server;
}

HttpApiServer::~HttpApiServer() = default;

namespace {

// Per request: the clock and tenant of the log line, the log line, and JSON bodies for the
// listener's own errors (too large, no route, overloaded, failed).
void InstallHooks(HttpRouter& http) {
  http.set_before([](const HttpRequest&, HttpResponse&) {
    request_tenant.clear();
    request_start = absl::Now();
  });
  // One line per request: method, path (never the query string or a body), status, time, tenant.
  http.set_logger([](const HttpRequest& request, const HttpResponse& response) {
    GANTRY_LOG(INFO).Field("tenant", request_tenant.empty() ? "-" : request_tenant)
        << "http " << request.method << " " << request.path.substr(0, 200) << " " << response.status
        << " " << absl::ToInt64Milliseconds(absl::Now() - request_start) << " ms";
  });
  http.set_error_handler([](const HttpRequest& request, HttpResponse& response) {
    if (response.status == 413) {
      ReplyError(response, absl::InvalidArgumentError(absl::StrCat(
                               "the request body is larger than ", kMaxBodyBytes, " bytes")));
      response.status = 413;
    } else if (response.status == 404) {
      ReplyError(response, absl::NotFoundError(absl::StrCat(
                               "no route ", request.method, " ", request.path.substr(0, 200),
                               "; the routes are in docs/API.md \"HTTP API\"")));
    } else if (response.status == 503) {
      ReplyError(response, absl::UnavailableError(
                               "the server has more requests waiting than it takes; try again"));
      response.status = 503;
    } else if (response.status == 500) {
      ReplyError(response, absl::InternalError("the request failed inside the server"));
    }
  });
}

}  // namespace

void HttpApiServer::AddSessionRoutes(HttpRouter& http) {
  http.Post("/api/v1/session", [this](const HttpRequest& request, HttpResponse& response) {
    Login(request, response);
  });
  http.Get("/api/v1/session", [this](const HttpRequest& request, HttpResponse& response) {
    std::string secret;
    if (!RequireSession(request, response, &secret)) return;
    ReplyJson(response, absl::StrCat("{\"tenant\":", JsonString(request_tenant),
                                     ",\"csrfToken\":", JsonString(CsrfTokenFor(secret)), "}"));
  });
  http.Delete("/api/v1/session", [this](const HttpRequest& request, HttpResponse& response) {
    std::string secret;
    if (!RequireSession(request, response, &secret)) return;
    if (absl::Status closed = web_sessions_.Close(secret); !closed.ok()) {
      return ReplyError(response, closed);
    }
    auth_.ForgetTokens();  // the session stops working at once on this server
    response.set_header("Set-Cookie", ClearedSessionCookie(secure_cookies_));
    ReplyJson(response, "{}");
  });
}

void HttpApiServer::AddRoutes(HttpRouter& http) {
  InstallHooks(http);
  AddSessionRoutes(http);

  // A unary route: the session, the request `build` makes of the HTTP request, the in-process
  // call, and its reply (as `present` shows it) as JSON; any failure as its HTTP error.
  const auto unary_presented = [this](auto* stub, auto method, auto build, auto present) {
    return
        [this, stub, method, build, present](const HttpRequest& request, HttpResponse& response) {
          std::string secret;
          if (!RequireSession(request, response, &secret)) return;
          auto call = build(request);
          if (!call.ok()) return ReplyError(response, call.status());
          typename ReplyOf<decltype(method)>::type reply;
          const grpc::Status status =
              (stub->*method)(ContextFor(secret, kCallTimeout).get(), *call, &reply);
          if (!status.ok()) return ReplyError(response, FromGrpcStatus(status));
          ReplyJson(response, ToJson(present(reply)));
        };
  };
  const auto unary = [&unary_presented](auto* stub, auto method, auto build) {
    return unary_presented(stub, method, build, AsIs());
  };
  v1::CatalogService::Stub* catalog = catalog_.get();
  v1::TrainingService::Stub* training = training_.get();
  using Catalog = v1::CatalogService::Stub;
  using Training = v1::TrainingService::Stub;

  // The catalog.
  http.Get("/api/v1/models", unary(catalog, &Catalog::ListModels, ListModelsOf));
  http.Get(R"(/api/v1/models/([^/]+)/versions)",
           unary(catalog, &Catalog::ListModels, ListModelsOf));
  http.Get(
      R"(/api/v1/models/([^/]+)/validation)",
      unary_presented(catalog, &Catalog::GetModel, ModelInPath<v1::GetModelRequest>, ValidationOf));
  http.Get(R"(/api/v1/models/([^/]+))",
           unary(catalog, &Catalog::GetModel, ModelInPath<v1::GetModelRequest>));
  http.Post(R"(/api/v1/models/([^/]+)/aliases)", unary(catalog, &Catalog::SetAlias, SetAliasOf));
  http.Delete(R"(/api/v1/models/([^/]+)/aliases/([^/]+))",
              unary(catalog, &Catalog::DeleteAlias, DeleteAliasOf));
  http.Post(R"(/api/v1/models/([^/]+):setTags)", unary(catalog, &Catalog::SetTags, SetTagsOf));
  http.Post(R"(/api/v1/models/([^/]+):archive)",
            unary(catalog, &Catalog::ArchiveModel, ModelInPath<v1::ArchiveModelRequest>));

  // Jobs.
  http.Get("/api/v1/jobs", unary(training, &Training::ListJobs, ListJobsOf));
  http.Get(R"(/api/v1/jobs/([^/]+)/events)",
           [this](const HttpRequest& request, HttpResponse& response) {
             std::string secret;
             if (!RequireSession(request, response, &secret)) return;
             ServeJobEvents(request, response, secret, request.matches[1]);
           });
  http.Get(R"(/api/v1/jobs/([^/]+)/logs)", unary(training, &Training::GetJobLogs, JobLogsOf));
  http.Get(R"(/api/v1/jobs/([^/]+)/metrics)",
           [this](const HttpRequest& request, HttpResponse& response) {
             std::string secret;
             if (!RequireSession(request, response, &secret)) return;
             ServeJobMetrics(request, response, secret, request.matches[1]);
           });
  http.Get(R"(/api/v1/jobs/([^/]+))", unary(training, &Training::GetJob, JobInPath));

  http.Post("/api/v1/generate", [this](const HttpRequest& request, HttpResponse& response) {
    std::string secret;
    if (!RequireSession(request, response, &secret)) return;
    Generate(request, response, secret);
  });

  // Anything else under /api/ is an unknown route; every other GET is the web app.
  http.Get(R"(/.*)", [this](const HttpRequest& request, HttpResponse& response) {
    if (absl::StartsWith(request.path, "/api/")) {
      return ReplyError(response, absl::NotFoundError(absl::StrCat(
                                      "no route GET ", request.path.substr(0, 200),
                                      "; the routes are in docs/API.md \"HTTP API\"")));
    }
    ServeStatic(request, response);
  });
}

bool HttpApiServer::RequireSession(const HttpRequest& request, HttpResponse& response,
                                   std::string* secret) {
  *secret = SessionSecretFromCookies(request.header("Cookie"));
  // Only session ids: an API token copied into the cookie is not a session.
  if (!storage::WebSessionRepository::IsSessionSecret(*secret)) {
    ReplyError(response, absl::UnauthenticatedError(
                             "no session: log in with POST /api/v1/session {\"token\": ...}"));
    return false;
  }
  absl::StatusOr<Principal> principal = verify_token_(Audience::kTenant, *secret);
  if (!principal.ok()) {
    if (absl::IsUnauthenticated(principal.status())) {
      response.set_header("Set-Cookie", ClearedSessionCookie(secure_cookies_));
    }
    ReplyError(response, principal.status());
    return false;
  }
  request_tenant = principal->tenant;
  if (request.method != "GET" && request.method != "HEAD") {
    if (!CsrfTokenMatches(*secret, request.header(std::string(kCsrfHeader)))) {
      ReplyError(response, absl::PermissionDeniedError(absl::StrCat(
                               "missing or wrong ", kCsrfHeader,
                               " header: send the csrfToken of GET /api/v1/session with "
                               "every write")));
      return false;
    }
    if (!request.body.empty() &&
        !absl::StartsWith(request.header("Content-Type"), "application/json")) {
      ReplyError(response, absl::InvalidArgumentError(
                               "the request body must be JSON (Content-Type: application/json)"));
      response.status = 415;
      return false;
    }
  }
  return true;
}

void HttpApiServer::Login(const HttpRequest& request, HttpResponse& response) {
  // Content-Type application/json cannot be sent cross-site without a CORS preflight, which this
  // server never grants: a foreign page cannot log a browser in.
  if (!absl::StartsWith(request.header("Content-Type"), "application/json")) {
    ReplyError(response, absl::InvalidArgumentError(
                             "log in with a JSON body {\"token\": \"...\"} and Content-Type: "
                             "application/json"));
    response.status = 415;
    return;
  }
  google::protobuf::Struct body;
  google::protobuf::util::JsonParseOptions options;
  if (!google::protobuf::util::JsonStringToMessage(request.body, &body, options).ok() ||
      body.fields_size() != 1 || body.fields().count("token") == 0 ||
      body.fields().at("token").kind_case() != google::protobuf::Value::kStringValue) {
    return ReplyError(response, absl::InvalidArgumentError(
                                    "the body must be {\"token\": \"<your gantry API token>\"}"));
  }
  const std::string& token = body.fields().at("token").string_value();
  if (token.empty() || token.size() > 512) {
    return ReplyError(response,
                      absl::InvalidArgumentError("token: give your gantry API token (gnt_...)"));
  }
  // A browser that logs in again ends the session it had.
  if (std::string old = SessionSecretFromCookies(request.header("Cookie")); !old.empty()) {
    web_sessions_.Close(old).IgnoreError();
    auth_.ForgetTokens();
  }
  absl::StatusOr<storage::OpenedSession> session = web_sessions_.Open(token, options_.session_ttl);
  if (!session.ok()) return ReplyError(response, session.status());
  request_tenant = session->tenant.tenant;
  response.set_header("Set-Cookie",
                      SessionCookie(session->secret, options_.session_ttl, secure_cookies_));
  ReplyJson(response, absl::StrCat("{\"tenant\":", JsonString(session->tenant.tenant),
                                   ",\"csrfToken\":", JsonString(CsrfTokenFor(session->secret)),
                                   ",\"expiresAt\":",
                                   JsonString(absl::FormatTime(session->expires_at)), "}"));
}

void HttpApiServer::ServeJobEvents(const HttpRequest& request, HttpResponse& response,
                                   const std::string& secret, const std::string& job_id) {
  v1::WatchJobRequest watch;
  watch.set_job_id(job_id);
  // Resuming: the browser's Last-Event-ID (EventSource reconnects) or ?afterSequence=.
  std::string after = request.header("Last-Event-ID");
  if (request.has_param("afterSequence")) after = request.param("afterSequence");
  if (!after.empty()) {
    int64_t sequence = 0;
    if (!absl::SimpleAtoi(after, &sequence) || sequence < 0) {
      return ReplyError(response, absl::InvalidArgumentError(
                                      "afterSequence: must be a non-negative event sequence"));
    }
    watch.set_after_sequence(sequence);
  }
  // The job must exist and be the caller's before the stream starts, so errors get their status.
  v1::GetJobRequest get;
  get.set_job_id(job_id);
  v1::Job job;
  if (grpc::Status status = training_->GetJob(ContextFor(secret, kCallTimeout).get(), get, &job);
      !status.ok()) {
    return ReplyError(response, FromGrpcStatus(status));
  }
  const std::string tenant = request_tenant;
  if (absl::Status taken = TakeEventStream(tenant); !taken.ok()) {
    return ReplyError(response, taken);
  }
  response.set_header("Content-Type", "text/event-stream");
  response.set_header("X-Accel-Buffering", "no");
  // Runs once whatever becomes of the connection, so the stream's place is always given back.
  response.stream = [this, secret, watch, tenant](HttpStream& sink) {
    StreamJobEvents(secret, watch, sink);
    ReleaseEventStream(tenant);
  };
}

absl::Status HttpApiServer::TakeEventStream(const std::string& tenant) {
  absl::MutexLock lock(&event_streams_mu_);
  int& mine = tenant_event_streams_[tenant];
  if (mine >= options_.max_event_streams_per_tenant) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "you already have ", mine,
        " job event streams open (the limit per tenant, --http-max-event-streams-per-tenant); "
        "close one (another tab) or poll GET /api/v1/jobs/{id}"));
  }
  if (event_streams_ >= options_.max_event_streams) {
    if (mine == 0) tenant_event_streams_.erase(tenant);
    return absl::ResourceExhaustedError(
        absl::StrCat("this server already streams ", options_.max_event_streams,
                     " job event streams (--http-max-event-streams); try again later or poll "
                     "GET /api/v1/jobs/{id}"));
  }
  ++mine;
  ++event_streams_;
  return absl::OkStatus();
}

void HttpApiServer::ReleaseEventStream(const std::string& tenant) {
  absl::MutexLock lock(&event_streams_mu_);
  --event_streams_;
  if (--tenant_event_streams_[tenant] <= 0) tenant_event_streams_.erase(tenant);
}

void HttpApiServer::StreamJobEvents(const std::string& secret, const v1::WatchJobRequest& watch,
                                    HttpStream& sink) {
  grpc::CompletionQueue queue;
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", secret));
  context.AddMetadata(kHttpApiKeyMetadata, options_.in_process_key);
  std::unique_ptr<grpc::ClientAsyncReader<v1::JobEvent>> reader =
      training_->PrepareAsyncWatchJob(&context, watch, &queue);
  bool client_gone = false;
  // Waits for the operation tagged `expected`; on an idle stream it writes a comment line every
  // event_keepalive, and cancels the call once the browser is gone.
  const auto wait = [&](void* expected) {
    for (;;) {
      void* tag = nullptr;
      bool ok = false;
      const auto next =
          queue.AsyncNext(&tag, &ok, absl::ToChronoTime(absl::Now() + options_.event_keepalive));
      if (next == grpc::CompletionQueue::GOT_EVENT && tag == expected) return ok;
      if (next == grpc::CompletionQueue::SHUTDOWN) return false;
      if (next == grpc::CompletionQueue::TIMEOUT && !client_gone) {
        static constexpr char kKeepalive[] = ": keepalive\n\n";
        if (!sink.Write(absl::string_view(kKeepalive, sizeof(kKeepalive) - 1))) {
          client_gone = true;
          context.TryCancel();
        }
      }
    }
  };
  static char kStart, kRead, kFinish;
  reader->StartCall(&kStart);
  bool open = wait(&kStart);
  v1::JobEvent event;
  while (open) {
    reader->Read(&event, &kRead);
    if (!wait(&kRead)) break;
    const std::string message =
        absl::StrCat("id: ", event.sequence(), "\ndata: ", ToJson(event), "\n\n");
    if (!client_gone && !sink.Write(message)) {
      client_gone = true;
      context.TryCancel();
    }
  }
  grpc::Status status;
  reader->Finish(&status, &kFinish);
  wait(&kFinish);
  if (!client_gone) {
    // How the stream ended: "end" when the job ended, "error" (a google.rpc.Status-like body)
    // when the call failed, e.g. UNAUTHENTICATED after a logout or a revoked token.
    const std::string last =
        status.ok()
            ? std::string("event: end\ndata: {}\n\n")
            : absl::StrCat("event: error\ndata: ", ErrorJson(FromGrpcStatus(status)), "\n\n");
    sink.Write(last);
  }
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }
}

void HttpApiServer::ServeJobMetrics(const HttpRequest& request, HttpResponse& response,
                                    const std::string& secret, const std::string& job_id) {
  int64_t after = 0;
  for (const auto& [name, value] : request.params) {
    if (name != "afterSequence" || !absl::SimpleAtoi(value, &after) || after < 0) {
      return ReplyError(response,
                        absl::InvalidArgumentError(
                            "query: this route takes only afterSequence (a non-negative event "
                            "sequence)"));
    }
  }
  // Visibility through TrainingService.GetJob: another tenant's job is NOT_FOUND, as in gRPC.
  v1::GetJobRequest get;
  get.set_job_id(job_id);
  v1::Job job;
  if (grpc::Status status = training_->GetJob(ContextFor(secret, kCallTimeout).get(), get, &job);
      !status.ok()) {
    return ReplyError(response, FromGrpcStatus(status));
  }
  // The loss curve is the job's progress events (rank 0's reports, at most one per
  // --progress-event-interval), read from the job's event log.
  std::vector<v1::JobEvent> points;
  int scanned = 0;
  int64_t cursor = after;
  while (scanned < kMaxMetricEventsScanned) {
    absl::StatusOr<std::vector<v1::JobEvent>> events = jobs_.ListEvents(job.id(), cursor, 1000);
    if (!events.ok()) return ReplyError(response, events.status());
    if (events->empty()) break;
    scanned += static_cast<int>(events->size());
    cursor = events->back().sequence();
    for (v1::JobEvent& e : *events) {
      if (e.has_progress()) points.push_back(std::move(e));
    }
  }
  // Evenly thinned to kMaxMetricPoints, always keeping the newest.
  const size_t stride = points.size() > kMaxMetricPoints
                            ? (points.size() + kMaxMetricPoints - 1) / kMaxMetricPoints
                            : 1;
  std::string json = "[";
  bool first = true;
  for (size_t i = 0; i < points.size(); ++i) {
    if (i % stride != 0 && i + 1 != points.size()) continue;
    const v1::JobEvent& e = points[i];
    std::string progress = ToJson(e.progress());  // "{...}"
    absl::StrAppend(&json, first ? "" : ",", "{\"sequence\":\"", e.sequence(), "\",\"time\":",
                    JsonString(absl::FormatTime(absl::RFC3339_full,
                                                absl::FromUnixSeconds(e.time().seconds()) +
                                                    absl::Nanoseconds(e.time().nanos()),
                                                absl::UTCTimeZone())),
                    progress.size() > 2 ? "," : "", progress.substr(1));
    first = false;
  }
  json += "]";
  ReplyJson(response, std::move(json));
}

void HttpApiServer::Generate(const HttpRequest& request, HttpResponse& response,
                             const std::string& secret) {
  v1::GenerateRequest generate;
  if (absl::Status parsed = ParseBody(request, &generate); !parsed.ok()) {
    return ReplyError(response, parsed);
  }
  const int64_t count = RequestedShowers(generate);
  if (count > options_.max_generate_showers) {
    return ReplyError(response,
                      absl::InvalidArgumentError(absl::StrCat(
                          "count: ", count, " showers is above the web download bound of ",
                          options_.max_generate_showers,
                          " (--http-max-generate-showers); use the gantry CLI or the Python "
                          "client for larger files")));
  }
  // The model's particle names the file's particle (and an unknown model is NOT_FOUND early).
  v1::GetModelRequest get;
  get.set_model(generate.model());
  v1::ModelVersion model;
  if (grpc::Status status = catalog_->GetModel(ContextFor(secret, kCallTimeout).get(), get, &model);
      !status.ok()) {
    return ReplyError(response, FromGrpcStatus(status));
  }
  const std::string path = absl::StrCat(options_.temp_dir, "/download-", downloads_.fetch_add(1),
                                        "-", RandomSecretHex(8), ".h5");
  std::unique_ptr<grpc::ClientContext> context = ContextFor(secret, kGenerateTimeout);
  std::unique_ptr<grpc::ClientReader<v1::GenerateChunk>> reader =
      generation_->Generate(context.get(), generate);
  absl::StatusOr<int64_t> written =
      WriteShowerStream([&](v1::GenerateChunk* chunk) { return reader->Read(chunk); }, count,
                        showers::FileParticle(model.particle()), path);
  if (!written.ok()) context->TryCancel();
  const grpc::Status finished = reader->Finish();
  absl::Status result = written.status();
  if (!finished.ok()) result = FromGrpcStatus(finished);
  if (result.ok() && *written != count) {
    result = absl::InternalError(
        absl::StrCat("the generation stream ended after ", *written, " of ", count, " showers"));
  }
  if (!result.ok()) {
    unlink(path.c_str());
    return ReplyError(response, result);
  }
  // Sent from an unlinked file: nothing is left behind whatever happens to the connection.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  unlink(path.c_str());
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return ReplyError(response, absl::InternalError("the generated file vanished"));
  }
  response.status = 200;
  response.set_header(
      "Content-Disposition",
      absl::StrCat("attachment; filename=\"",
                   DownloadName(absl::StrCat(model.name(), "-v", model.version()), count), "\""));
  response.set_header("Content-Type", "application/x-hdf5");
  // Sent by the listener's event loop: no handler thread waits on a slow download.
  response.file_fd = fd;
  response.file_size = static_cast<uint64_t>(st.st_size);
}

void HttpApiServer::ServeStatic(const HttpRequest& request, HttpResponse& response) {
  if (static_files_ == nullptr) {
    return ReplyError(
        response, absl::NotFoundError("this server has no web app: start it with --web-root (the "
                                      "built app, <build>/web)"));
  }
  absl::StatusOr<StaticFile> file = static_files_->Read(request.path);
  if (!file.ok()) {
    response.status = HttpStatusOf(file.status().code());
    response.set_content("not found\n", "text/plain; charset=utf-8");
    return;
  }
  response.set_header("Cache-Control",
                      file->immutable ? "public, max-age=31536000, immutable" : "no-cache");
  response.set_content(std::move(file->content), file->content_type);
}

}  // namespace gantry::server::http
