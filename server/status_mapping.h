// StatusMapping: the one place where an absl::Status becomes a grpc::Status (codes share their
// numbering).
#ifndef GANTRY_SERVER_STATUS_MAPPING_H_
#define GANTRY_SERVER_STATUS_MAPPING_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace gantry::server {

// Maps code and message unchanged; an unknown code becomes UNKNOWN. Every handler returns through
// this.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_STATUS_MAPPING_H_
