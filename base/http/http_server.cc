#include "base/http/http_server.h"

#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/http/listen_address.h"
#include "base/periodic_task.h"

namespace gantry {

// ---- request and response -------------------------------------------------------------------

namespace {

// The first header of that name (ASCII case-insensitive), or "".
std::string FindHeader(const std::vector<std::pair<std::string, std::string>>& headers,
                       absl::string_view name) {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return value;
  }
  return "";
}

}  // namespace

std::string HttpRequest::header(absl::string_view name) const { return FindHeader(headers, name); }

std::string HttpRequest::param(absl::string_view name) const {
  auto it = params.find(std::string(name));
  return it == params.end() ? "" : it->second;
}

HttpResponse::~HttpResponse() {
  if (file_fd >= 0) close(file_fd);
}

void HttpResponse::set_header(absl::string_view name, absl::string_view value) {
  for (auto& [key, old] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) {
      old = std::string(value);
      return;
    }
  }
  headers.emplace_back(std::string(name), std::string(value));
}

std::string HttpResponse::header(absl::string_view name) const { return FindHeader(headers, name); }

void HttpResponse::set_content(std::string content, absl::string_view content_type) {
  body = std::move(content);
  set_header("Content-Type", content_type);
}

// ---- router ---------------------------------------------------------------------------------

void HttpRouter::Add(const std::string& method, const std::string& pattern, Handler handler) {
  routes_.push_back(Route{method, std::regex(pattern), std::move(handler)});
}

void HttpRouter::FillError(const HttpRequest& request, HttpResponse& response) const {
  if (error_handler_ && response.status >= 400 && response.body.empty() && !response.stream &&
      response.file_fd < 0) {
    error_handler_(request, response);
  }
}

void HttpRouter::Handle(HttpRequest& request, HttpResponse& response) const {
  try {
    if (before_) before_(request, response);
    const std::string& method = request.method == "HEAD" ? std::string("GET") : request.method;
    const Route* found = nullptr;
    std::smatch match;
    for (const Route& route : routes_) {
      if (route.method == method && std::regex_match(request.path, match, route.pattern)) {
        found = &route;
        break;
      }
    }
    if (found == nullptr) {
      response.status = 404;
    } else {
      request.matches.assign(match.begin(), match.end());
      found->handler(request, response);
    }
  } catch (const std::exception&) {
    response.status = 500;
    response.body.clear();
    response.stream = nullptr;
  }
  FillError(request, response);
  if (logger_) logger_(request, response);
}

// ---- server ---------------------------------------------------------------------------------

namespace {

// A fixed set of threads running queued tasks; the queue is bounded by its one submitter's check.
class HandlerPool {
 public:
  explicit HandlerPool(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
  }
  ~HandlerPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }
  size_t queued() {
    std::lock_guard<std::mutex> lock(mu_);
    return tasks_.size();
  }
  void Submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping, and everything queued has run
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// The body of a streamed response between its producer (a handler thread) and the event loop.
class StreamBody : public HttpStream {
 public:
  static constexpr size_t kMaxPending = 256 << 10;

  StreamBody(MHD_Connection* connection, const std::atomic<bool>* stopping,
             absl::Duration write_timeout)
      : connection_(connection), stopping_(stopping), write_timeout_(write_timeout) {}

  bool Write(absl::string_view data) override {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline =
        std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(write_timeout_);
    while (pending_.size() - sent_ >= kMaxPending && !gone_ && !*stopping_) {
      // Short waits, so a server that stops is noticed.
      if (taken_.wait_for(lock, std::chrono::milliseconds(200)) == std::cv_status::timeout &&
          std::chrono::steady_clock::now() > deadline) {
        return false;
      }
    }
    if (gone_ || *stopping_) return false;
    pending_.append(data.data(), data.size());
    WakeLocked();
    return true;
  }

  // The producer has returned: the body ends after what is pending.
  void Finish() {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    WakeLocked();
  }

  // MHD_ContentReaderCallback, on the event loop.
  ssize_t Read(char* buffer, size_t max) {
    std::lock_guard<std::mutex> lock(mu_);
    if (sent_ < pending_.size()) {
      const size_t n = std::min(max, pending_.size() - sent_);
      memcpy(buffer, pending_.data() + sent_, n);
      sent_ += n;
      if (sent_ == pending_.size()) {
        pending_.clear();
        sent_ = 0;
      } else if (sent_ > kMaxPending) {
        pending_.erase(0, sent_);
        sent_ = 0;
      }
      taken_.notify_all();
      return static_cast<ssize_t>(n);
    }
    if (finished_) return MHD_CONTENT_READER_END_OF_STREAM;
    if (*stopping_) return MHD_CONTENT_READER_END_WITH_ERROR;
    suspended_ = true;
    MHD_suspend_connection(connection_);
    return 0;
  }

  // The response is gone (sent, or its connection closed): writes fail from now on.
  void Gone() {
    std::lock_guard<std::mutex> lock(mu_);
    gone_ = true;
    suspended_ = false;
    taken_.notify_all();
  }

 private:
  void WakeLocked() {
    if (suspended_ && !gone_) {
      suspended_ = false;
      MHD_resume_connection(connection_);
    }
  }

  MHD_Connection* const connection_;
  const std::atomic<bool>* const stopping_;
  const absl::Duration write_timeout_;
  std::mutex mu_;
  std::condition_variable taken_;
  std::string pending_;  // bytes [sent_, size) wait for the event loop
  size_t sent_ = 0;
  bool suspended_ = false;  // the event loop waits for bytes: resume it on the next write
  bool finished_ = false;
  bool gone_ = false;
};

ssize_t ReadStream(void* cls, uint64_t, char* buffer, size_t max) {
  return (*static_cast<std::shared_ptr<StreamBody>*>(cls))->Read(buffer, max);
}

void FreeStream(void* cls) {
  auto* body = static_cast<std::shared_ptr<StreamBody>*>(cls);
  (*body)->Gone();
  delete body;
}

// MHD_KeyValueIteratorN: adds one header or query parameter to the HttpRequest's `Field`.
template <typename Container, Container HttpRequest::*Field>
MHD_Result CollectValue(void* cls, MHD_ValueKind, const char* key, size_t key_size,
                        const char* value, size_t value_size) {
  Container& values = static_cast<HttpRequest*>(cls)->*Field;
  values.insert(
      values.end(),  // in arrival order
      typename Container::value_type(std::string(key, key_size),
                                     value == nullptr ? "" : std::string(value, value_size)));
  return MHD_YES;
}

// Percent-decoding of the path and the query, except %00: a NUL is kept as the text "%00", so no
// C string is cut short and handlers see it.
size_t Unescape(void*, MHD_Connection*, char* s) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  char* out = s;
  for (const char* in = s; *in != '\0'; ++in) {
    if (in[0] == '%' && in[1] != '\0' && in[2] != '\0') {
      const int high = hex(in[1]);
      const int low = hex(in[2]);
      if (high >= 0 && low >= 0 && (high | low) != 0) {
        *out++ = static_cast<char>(high * 16 + low);
        in += 2;
        continue;
      }
    }
    *out++ = *in;
  }
  *out = '\0';
  return static_cast<size_t>(out - s);
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(std::unique_ptr<HttpRouter> router, const HttpServerOptions& options)
      : router_(std::move(router)),
        options_(options),
        pool_(std::max(1, options.handler_threads)),
        deadlines_(
            std::clamp(options.request_timeout / 4, absl::Milliseconds(50), absl::Seconds(1)),
            [this] { CloseLateRequests(); }) {}

  ~Impl() {
    stopping_ = true;
    deadlines_.Stop();
    // No new connections; the listening socket is ours again (MHD's otherwise).
    if (daemon_ != nullptr && MHD_quiesce_daemon(daemon_) < 0) listen_fd_ = -1;
    // Running handlers end, and streams see `stopping_` at their next write.
    while (running_.load() > 0) absl::SleepFor(absl::Milliseconds(5));
    if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
    if (listen_fd_ >= 0) close(listen_fd_);
  }

  absl::Status Start();
  const std::string& address() const { return address_; }

 private:
  // Per request, from its first callback to its completion.
  struct Exchange {
    HttpRequest request;
    bool body_too_large = false;
    bool dispatched = false;
    MHD_Response* ready = nullptr;  // set by the handler thread before it resumes the connection
    int ready_status = 0;
  };

  static MHD_Result Access(void* cls, MHD_Connection* connection, const char* url,
                           const char* method, const char*, const char* upload_data,
                           size_t* upload_data_size, void** con_cls);
  static void Completed(void* cls, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode);
  // MHD_NotifyConnectionCallback: connections enter and leave `watched_`.
  static void Connection(void* cls, MHD_Connection* connection, void** socket_context,
                         MHD_ConnectionNotificationCode code);
  // Whether `connection` waits for a request, and since when (a request arrived whole: no).
  void SetWaiting(MHD_Connection* connection, bool waiting);
  // Shuts down the socket of every connection that has waited for its request longer than
  // options_.request_timeout; the event loop then sees it closed and cleans up.
  void CloseLateRequests();
  MHD_Result Answer(MHD_Connection* connection, Exchange& exchange, const char* url,
                    const char* method, const char* upload_data, size_t* upload_data_size);
  // The listener's own answer (413, 503), on the event loop.
  MHD_Result Refuse(MHD_Connection* connection, Exchange& exchange, int status);
  // An MHD response with `response`'s body and headers (the default headers added); for a
  // stream, `stream` receives its body.
  MHD_Response* Build(HttpResponse& response, MHD_Connection* connection,
                      std::shared_ptr<StreamBody>* stream);
  void Run(MHD_Connection* connection, Exchange* exchange);

  const std::unique_ptr<HttpRouter> router_;
  const HttpServerOptions options_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> running_{0};  // handler tasks queued or running (streams included)
  HandlerPool pool_;
  MHD_Daemon* daemon_ = nullptr;
  int listen_fd_ = -1;
  std::string address_;
  // Open connections: the socket and, while one waits for its request, since when. MHD reports a
  // connection closed (which takes watch_mu_) before it closes the socket, so a socket shut down
  // under watch_mu_ is still this connection's.
  struct Watched {
    int fd = -1;
    bool waiting = true;
    std::chrono::steady_clock::time_point since;
  };
  absl::Mutex watch_mu_;
  absl::flat_hash_map<MHD_Connection*, Watched> watched_ ABSL_GUARDED_BY(watch_mu_);
  PeriodicTask deadlines_;
};

absl::Status HttpServer::Impl::Start() {
  absl::StatusOr<HostPort> host_port = ParseListenAddress(options_.address, options_.flag);
  if (!host_port.ok()) return host_port.status();
  const auto unavailable = [&] {
    return absl::UnavailableError(
        absl::StrCat(options_.flag, ": cannot listen on ", options_.address,
                     " (address in use, or not an address of this host)"));
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(host_port->port);
  if (getaddrinfo(host_port->host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    return unavailable();
  }
  for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR only: SO_REUSEPORT would let a second process bind the same port silently.
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      listen_fd_ = fd;
    } else {
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) return unavailable();
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port = bound.ss_family == AF_INET6
                             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  address_ = FormatHostPort(host_port->host, bound_port);

  const bool tls = !options_.tls_cert_pem.empty() || !options_.tls_key_pem.empty();
  // A client that closes mid-answer must not kill the process (MHD may use sendfile).
  signal(SIGPIPE, SIG_IGN);
  // poll(2), level-triggered, not epoll: with epoll (edge-triggered in libmicrohttpd 0.9.75) a client
  // whose request bytes and FIN arrived before the event loop ran was left in CLOSE-WAIT, its place
  // under the per-address cap held until the idle timeout (3 of 12 runs of
  // HttpServerTest.OneAddressHoldsAtMostItsShareOfConnections under ASan and load; 0 of 16 with poll).
  unsigned int flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
  if (tls) flags |= MHD_USE_TLS;
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_LISTEN_SOCKET, listen_fd_, nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&Impl::Completed), this},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&Impl::Connection), this},
      {MHD_OPTION_UNESCAPE_CALLBACK, reinterpret_cast<intptr_t>(&Unescape), nullptr},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(options_.connection_memory_bytes),
       nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT,
       static_cast<intptr_t>(std::max<int64_t>(1, absl::ToInt64Seconds(options_.idle_timeout))),
       nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, options_.max_connections, nullptr},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, options_.max_connections_per_ip, nullptr},
      {MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, nullptr},
  };
  if (tls) {
    // MHD reads the PEM text as C strings and never writes it (its option slot is a void*).
    items.push_back(
        {MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(options_.tls_cert_pem.c_str())});
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(options_.tls_key_pem.c_str())});
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  daemon_ = MHD_start_daemon(flags, 0, nullptr, nullptr, &Impl::Access, this, MHD_OPTION_ARRAY,
                             items.data(), MHD_OPTION_END);
  if (daemon_ == nullptr) {
    if (tls) {
      return absl::InvalidArgumentError(absl::StrCat(
          options_.flag, " with TLS: --tls-cert/--tls-key could not be loaded for HTTPS"));
    }
    return unavailable();
  }
  deadlines_.Start();
  return absl::OkStatus();
}

MHD_Result HttpServer::Impl::Access(void* cls, MHD_Connection* connection, const char* url,
                                    const char* method, const char*, const char* upload_data,
                                    size_t* upload_data_size, void** con_cls) {
  auto* self = static_cast<Impl*>(cls);
  auto* exchange = static_cast<Exchange*>(*con_cls);
  if (exchange == nullptr) {
    exchange = new Exchange();
    *con_cls = exchange;
  }
  return self->Answer(connection, *exchange, url, method, upload_data, upload_data_size);
}

void HttpServer::Impl::Completed(void* cls, MHD_Connection* connection, void** con_cls,
                                 MHD_RequestTerminationCode) {
  // Answered: on a kept-alive connection the next request's time starts now.
  static_cast<Impl*>(cls)->SetWaiting(connection, true);
  auto* exchange = static_cast<Exchange*>(*con_cls);
  if (exchange == nullptr) return;
  if (exchange->ready != nullptr) MHD_destroy_response(exchange->ready);
  delete exchange;
  *con_cls = nullptr;
}

void HttpServer::Impl::Connection(void* cls, MHD_Connection* connection, void**,
                                  MHD_ConnectionNotificationCode code) {
  auto* self = static_cast<Impl*>(cls);
  absl::MutexLock lock(&self->watch_mu_);
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    self->watched_.erase(connection);
    return;
  }
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info == nullptr) return;
  self->watched_[connection] = Watched{info->connect_fd, true, std::chrono::steady_clock::now()};
}

void HttpServer::Impl::SetWaiting(MHD_Connection* connection, bool waiting) {
  absl::MutexLock lock(&watch_mu_);
  auto it = watched_.find(connection);
  if (it == watched_.end()) return;
  it->second.waiting = waiting;
  it->second.since = std::chrono::steady_clock::now();
}

void HttpServer::Impl::CloseLateRequests() {
  const auto late =
      std::chrono::steady_clock::now() - absl::ToChronoNanoseconds(options_.request_timeout);
  absl::MutexLock lock(&watch_mu_);
  for (auto& [connection, watched] : watched_) {
    if (!watched.waiting || watched.since > late) continue;
    shutdown(watched.fd, SHUT_RDWR);
    watched.waiting = false;  // once is enough: MHD closes it
  }
}

MHD_Result HttpServer::Impl::Answer(MHD_Connection* connection, Exchange& exchange, const char* url,
                                    const char* method, const char* upload_data,
                                    size_t* upload_data_size) {
  if (exchange.ready != nullptr) {  // the handler thread is done and resumed us
    MHD_Response* response = exchange.ready;
    exchange.ready = nullptr;
    const MHD_Result queued = MHD_queue_response(connection, exchange.ready_status, response);
    MHD_destroy_response(response);
    return queued;
  }
  if (exchange.dispatched) return MHD_YES;  // not expected: we are suspended until ready
  HttpRequest& request = exchange.request;
  if (request.method.empty()) {  // the first call: request line and headers are in
    request.method = method;
    request.path = url;
    MHD_get_connection_values_n(connection, MHD_HEADER_KIND,
                                &CollectValue<decltype(request.headers), &HttpRequest::headers>,
                                &request);
    MHD_get_connection_values_n(connection, MHD_GET_ARGUMENT_KIND,
                                &CollectValue<decltype(request.params), &HttpRequest::params>,
                                &request);
    uint64_t declared = 0;
    const std::string length = request.header("Content-Length");
    if (!length.empty() &&
        (!absl::SimpleAtoi(length, &declared) || declared > options_.max_body_bytes)) {
      return Refuse(connection, exchange, 413);
    }
    return MHD_YES;
  }
  if (*upload_data_size > 0) {  // a piece of the body
    if (!exchange.body_too_large) {
      if (request.body.size() + *upload_data_size > options_.max_body_bytes) {
        exchange.body_too_large = true;
        request.body.clear();
      } else {
        request.body.append(upload_data, *upload_data_size);
      }
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  // The request is complete.
  SetWaiting(connection, false);
  if (exchange.body_too_large) return Refuse(connection, exchange, 413);
  if (stopping_ || pool_.queued() >= static_cast<size_t>(options_.max_queued_requests)) {
    return Refuse(connection, exchange, 503);
  }
  exchange.dispatched = true;
  ++running_;
  MHD_suspend_connection(connection);
  Exchange* pending = &exchange;
  pool_.Submit([this, connection, pending] { Run(connection, pending); });
  return MHD_YES;
}

MHD_Result HttpServer::Impl::Refuse(MHD_Connection* connection, Exchange& exchange, int status) {
  SetWaiting(connection, false);  // answered; the connection closes after the answer
  HttpResponse response;
  response.status = status;
  router_->FillError(exchange.request, response);
  MHD_Response* answer = Build(response, connection, nullptr);
  if (answer == nullptr) return MHD_NO;
  // The rest of a refused body is not read: the connection closes after the answer.
  MHD_add_response_header(answer, MHD_HTTP_HEADER_CONNECTION, "close");
  const MHD_Result queued = MHD_queue_response(connection, status, answer);
  MHD_destroy_response(answer);
  return queued;
}

MHD_Response* HttpServer::Impl::Build(HttpResponse& response, MHD_Connection* connection,
                                      std::shared_ptr<StreamBody>* stream) {
  MHD_Response* answer = nullptr;
  if (response.stream && stream != nullptr) {
    *stream = std::make_shared<StreamBody>(connection, &stopping_, options_.stream_write_timeout);
    answer =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 << 10, &ReadStream,
                                          new std::shared_ptr<StreamBody>(*stream), &FreeStream);
  } else if (response.file_fd >= 0) {
    answer = MHD_create_response_from_fd64(response.file_size, response.file_fd);
    if (answer != nullptr) response.file_fd = -1;  // MHD closes it
  } else {
    answer = MHD_create_response_from_buffer(response.body.size(), response.body.data(),
                                             MHD_RESPMEM_MUST_COPY);
  }
  if (answer == nullptr) return nullptr;
  for (const auto& [name, value] : router_->default_headers()) {
    if (response.header(name).empty()) MHD_add_response_header(answer, name.c_str(), value.c_str());
  }
  for (const auto& [name, value] : response.headers) {
    MHD_add_response_header(answer, name.c_str(), value.c_str());
  }
  return answer;
}

void HttpServer::Impl::Run(MHD_Connection* connection, Exchange* exchange) {
  HttpResponse response;
  router_->Handle(exchange->request, response);
  std::shared_ptr<StreamBody> stream;
  MHD_Response* answer = Build(response, connection, &stream);
  if (answer == nullptr) {  // out of memory: an empty 500
    response.status = 500;
    answer = MHD_create_response_from_buffer(0, nullptr, MHD_RESPMEM_PERSISTENT);
  }
  exchange->ready = answer;
  exchange->ready_status = response.status;
  // From here the exchange belongs to the event loop again.
  MHD_resume_connection(connection);
  if (stream != nullptr) {
    response.stream(*stream);
    stream->Finish();
  }
  --running_;
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

const std::string& HttpServer::address() const { return impl_->address(); }

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(std::unique_ptr<HttpRouter> router,
                                                              const HttpServerOptions& options) {
  if (options.handler_threads < 1 || options.max_queued_requests < 1 ||
      options.max_connections < 1 || options.max_connections_per_ip < 1 ||
      options.connection_memory_bytes < 4096 || options.request_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.flag,
                     ": the HTTP listener needs positive thread, queue and connection limits, a "
                     "positive request timeout and at least 4 KiB per connection"));
  }
  auto impl = std::make_unique<Impl>(std::move(router), options);
  if (absl::Status started = impl->Start(); !started.ok()) return started;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace gantry
