#include "server/platform/rpc_metrics.h"

#include <string>

#include "absl/status/status.h"
#include "server/platform/server_metrics.h"

namespace gantry::server {

std::string StatusCodeName(grpc::StatusCode code) {
  // gRPC's codes are absl's, number for number; absl names an out-of-range code "".
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "UNKNOWN" : name;
}

void RecordRpc(const std::string& method, grpc::StatusCode code, absl::Duration duration) {
  const ServerMetrics& m = GetServerMetrics();
  m.rpcs.Increment({method, StatusCodeName(code)});
  m.rpc_seconds.Observe({method}, absl::ToDoubleSeconds(duration));
}

}  // namespace gantry::server
