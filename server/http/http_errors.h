// HTTP status codes and JSON error bodies for gRPC statuses, as grpc-gateway maps them.
#ifndef GANTRY_SERVER_HTTP_HTTP_ERRORS_H_
#define GANTRY_SERVER_HTTP_HTTP_ERRORS_H_

#include <string>

#include "absl/status/status.h"

namespace gantry::server::http {

// INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE 400; UNAUTHENTICATED 401; PERMISSION_DENIED
// 403; NOT_FOUND 404; ALREADY_EXISTS, ABORTED 409; RESOURCE_EXHAUSTED 429; CANCELLED 499;
// UNIMPLEMENTED 501; UNAVAILABLE 503; DEADLINE_EXCEEDED 504; the rest 500. OK is 200.
int HttpStatusOf(absl::StatusCode code);

// {"code": 5, "status": "NOT_FOUND", "message": "..."} (google.rpc.Status-like).
std::string ErrorJson(const absl::Status& status);

}  // namespace gantry::server::http

#endif  // GANTRY_SERVER_HTTP_HTTP_ERRORS_H_
