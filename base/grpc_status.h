// The one conversion between grpc::Status and absl::Status. Both follow google.rpc.Code, so codes
// map one to one; a code outside 0..16 becomes UNKNOWN.
#ifndef GANTRY_BASE_GRPC_STATUS_H_
#define GANTRY_BASE_GRPC_STATUS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace gantry {

// The longest status message sent to a client; longer ones are cut (they quote a huge value).
inline constexpr size_t kMaxStatusMessageBytes = 2048;

// Code unchanged; the message with its control characters escaped (BoundedField, base/safe_text.h)
// and, when longer than kMaxStatusMessageBytes, cut with a note of how much was cut. Errors carry a
// google.rpc.Status in the details trailer with the status's details (base/status_details.h), plus
// an ErrorInfo reason (the code's name unless one was set) and, for UNAVAILABLE and ABORTED, a
// RetryInfo of 1 s unless one was set.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Code and message unchanged; the details of a google.rpc.Status trailer (at most 64 KiB) become
// the status's details.
absl::Status FromGrpcStatus(const grpc::Status& status);

// Same code and details; the message becomes "<context>: <message>". OK stays OK.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view context);

}  // namespace gantry

#endif  // GANTRY_BASE_GRPC_STATUS_H_
