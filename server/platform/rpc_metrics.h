// RpcMetrics: what every answered call adds to the server's RPC metrics
// (gantry_rpc_requests_total by method and code, gantry_rpc_duration_seconds by method). The
// request log interceptor (server/request_log.h) feeds it, so each call is clocked once.
#ifndef GANTRY_SERVER_PLATFORM_RPC_METRICS_H_
#define GANTRY_SERVER_PLATFORM_RPC_METRICS_H_

#include <string>

#include "absl/time/time.h"
#include "grpcpp/support/status.h"

namespace gantry::server {

// The name of a status code as the metrics and the request log show it ("NOT_FOUND").
std::string StatusCodeName(grpc::StatusCode code);

// Counts one answered call of `method` (a full method name) and observes its duration.
// Thread-safe.
void RecordRpc(const std::string& method, grpc::StatusCode code, absl::Duration duration);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_RPC_METRICS_H_
