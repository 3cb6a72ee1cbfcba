#include "server/platform/request_log.h"

#include <cstdio>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/log.h"
#include "server/platform/rpc_metrics.h"

namespace gantry::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

// One generator per thread: sampling and ids take no lock.
absl::BitGen& Random() {
  thread_local absl::BitGen gen;
  return gen;
}

// A failure of the server's own making (the rest are caused by the request or its caller).
bool IsServerFault(grpc::StatusCode code) {
  return code == grpc::StatusCode::INTERNAL || code == grpc::StatusCode::UNKNOWN ||
         code == grpc::StatusCode::DATA_LOSS || code == grpc::StatusCode::UNAVAILABLE ||
         code == grpc::StatusCode::UNIMPLEMENTED;
}

// Per call: the clock starts when the call is created; takes or makes the id on the received
// metadata, returns it with the initial and the trailing metadata, and when the status is sent
// records the metrics and logs the line.
class RequestLogInterceptor : public grpc::experimental::Interceptor {
 public:
  RequestLogInterceptor(const RequestLogInterceptorFactory* factory,
                        grpc::experimental::ServerRpcInfo* info)
      : factory_(factory),
        info_(info),
        method_(info->method() != nullptr ? info->method() : "unknown"),
        start_(absl::Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      const auto* metadata = methods->GetRecvInitialMetadata();
      const auto it = metadata->find(kRequestIdKey);
      if (it != metadata->end()) {
        const absl::string_view sent(it->second.data(), it->second.size());
        if (IsValidRequestId(sent)) id_ = std::string(sent);
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kRequestIdKey, Id());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      methods->GetSendTrailingMetadata()->emplace(kRequestIdKey, Id());
      const grpc::Status status = methods->GetSendStatus();
      const absl::Duration duration = absl::Now() - start_;
      RecordRpc(method_, status.error_code(), duration);
      Log(status, duration);
    }
    methods->Proceed();
  }

 private:
  const std::string& Id() {
    if (id_.empty()) id_ = NewRequestId();
    return id_;
  }

  void Log(const grpc::Status& status, absl::Duration duration) {
    const bool failed = !status.ok();
    if (!failed) {
      const double rate = factory_->sample_rate();
      if (rate <= 0) return;
      if (rate < 1 && !absl::Bernoulli(Random(), rate)) return;
    }
    const LogLevel level = !failed                              ? LogLevel::kInfo
                           : IsServerFault(status.error_code()) ? LogLevel::kError
                                                                : LogLevel::kWarning;
    if (!LogEnabled(level)) return;
    std::string caller;
    if (factory_->auth() != nullptr) {
      absl::StatusOr<Principal> principal = factory_->auth()->PrincipalOf(info_->server_context());
      if (principal.ok()) {
        caller = principal->worker ? "worker:" + principal->worker_id : principal->tenant;
      }
    }
    LogLine line(level, __FILE__, __LINE__);
    line.Field("method", method_)
        .Field("tenant", caller)
        .Field("code", StatusCodeName(status.error_code()))
        .Field("duration_ms", absl::StrFormat("%.3f", absl::ToDoubleMilliseconds(duration)))
        .Field("request_id", Id());
    if (failed) line.Field("error", status.error_message());
    line << "rpc " << method_ << " " << StatusCodeName(status.error_code());
  }

  const RequestLogInterceptorFactory* factory_;
  grpc::experimental::ServerRpcInfo* info_;
  const std::string method_;
  const absl::Time start_;
  std::string id_;  // hooks of one call run one at a time
};

}  // namespace

bool IsValidRequestId(absl::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (const char c : id) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != ':' && c != '-') return false;
  }
  return true;
}

std::string NewRequestId() { return absl::StrFormat("%016x", absl::Uniform<uint64_t>(Random())); }

grpc::experimental::Interceptor* RequestLogInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new RequestLogInterceptor(this, info);
}

}  // namespace gantry::server
