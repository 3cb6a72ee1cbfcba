// RpcMetricsInterceptorFactory: a server interceptor that counts every call by method and status
// code and observes its duration (gantry_rpc_requests_total, gantry_rpc_duration_seconds).
#ifndef GANTRY_SERVER_RPC_METRICS_H_
#define GANTRY_SERVER_RPC_METRICS_H_

#include <string>

#include "grpcpp/support/server_interceptor.h"

namespace gantry::server {

// The name of a status code as the metrics and the request log show it ("NOT_FOUND").
std::string StatusCodeName(grpc::StatusCode code);

// Thread-safe; owned by the grpc::Server.
class RpcMetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_RPC_METRICS_H_
