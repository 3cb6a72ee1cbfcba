#include "server/rpc_metrics.h"

#include <string>

#include "absl/status/status.h"
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

std::string StatusCodeName(grpc::StatusCode code) {
  // gRPC's codes are absl's, number for number; absl names an out-of-range code "".
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "UNKNOWN" : name;
}

grpc::experimental::Interceptor* RpcMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new RpcMetricsInterceptor(info);
}

}  // namespace gantry::server
