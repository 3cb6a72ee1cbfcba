#include "server/rpc_metrics.h"

#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/server_metrics.h"

namespace gantry::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

// Per call: the clock starts when the call is created and the sample is taken when the status is
// sent (calls the server never answers, e.g. cancelled before a status, are not counted).
class RpcMetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit RpcMetricsInterceptor(grpc::experimental::ServerRpcInfo* info)
      : method_(info->method() != nullptr ? info->method() : "unknown"), start_(absl::Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const ServerMetrics& m = GetServerMetrics();
      m.rpcs.Increment({method_, StatusCodeName(methods->GetSendStatus().error_code())});
      m.rpc_seconds.Observe({method_}, absl::ToDoubleSeconds(absl::Now() - start_));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  const absl::Time start_;
};

}  // namespace

const char* StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

grpc::experimental::Interceptor* RpcMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new RpcMetricsInterceptor(info);
}

}  // namespace gantry::server
