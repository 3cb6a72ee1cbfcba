// RequestLog: a server interceptor that gives every call a request id, logs one line per call and
// feeds the RPC metrics (server/rpc_metrics.h), timing each call once for both.
//
// The id is the client's `x-request-id` metadata when it is a plausible id (1 to 128 characters of
// [A-Za-z0-9._:-]), otherwise a new random one; the server returns it as `x-request-id` in both
// the initial and the trailing metadata. When the call ends, a line with method, tenant (or
// worker), status code, duration and request id is logged: always for failed calls (WARNING for
// codes a client causes, ERROR for INTERNAL, UNKNOWN, DATA_LOSS, UNAVAILABLE and UNIMPLEMENTED),
// and for a random `sample_rate` share of successful ones (INFO). Every answered call is counted in
// the metrics, logged or not (a call cancelled before a status is sent is neither).
#ifndef GANTRY_SERVER_PLATFORM_REQUEST_LOG_H_
#define GANTRY_SERVER_PLATFORM_REQUEST_LOG_H_

#include <string>

#include "absl/strings/string_view.h"
#include "grpcpp/support/server_interceptor.h"
#include "server/platform/auth.h"

namespace gantry::server {

// The metadata key of request ids (requests and responses).
inline constexpr char kRequestIdKey[] = "x-request-id";

// Whether `id` is kept as the request id (else the server makes one).
bool IsValidRequestId(absl::string_view id);

// A new random request id (16 hex digits). Thread-safe.
std::string NewRequestId();

// Thread-safe; owned by the grpc::Server. `auth` (for the tenant of a call) must outlive it.
class RequestLogInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // sample_rate: 0 (no successful call logged) .. 1 (all).
  RequestLogInterceptorFactory(const AuthInterceptorFactory* auth, double sample_rate)
      : auth_(auth), sample_rate_(sample_rate) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

  const AuthInterceptorFactory* auth() const { return auth_; }
  double sample_rate() const { return sample_rate_; }

 private:
  const AuthInterceptorFactory* auth_;
  const double sample_rate_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_REQUEST_LOG_H_
