// Machine-readable error details on an absl::Status, sent to clients as the details of a
// google.rpc.Status (the grpc-status-details-bin trailer): which request fields are wrong
// (google.rpc.BadRequest), a stable reason (google.rpc.ErrorInfo) and when to retry
// (google.rpc.RetryInfo). They ride on the status as payloads keyed by their type URL, so they pass
// through ASSIGN_OR_RETURN and friends unchanged; ToGrpcStatus/FromGrpcStatus (base/grpc_status.h)
// carry them across the wire.
#ifndef GANTRY_BASE_STATUS_DETAILS_H_
#define GANTRY_BASE_STATUS_DETAILS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gantry {

// The ErrorInfo domain of every reason gantry sets.
inline constexpr absl::string_view kErrorDomain = "gantry";

// Bounds: a status carries at most this many field violations (later ones are dropped), and
// descriptions and metadata values are cut at kMaxDetailBytes, so the trailer stays small.
inline constexpr size_t kMaxFieldViolations = 16;
inline constexpr size_t kMaxDetailBytes = 512;

struct FieldViolation {
  std::string field;        // a path into the request, e.g. "spec.epochs"
  std::string description;  // what is wrong and what to change
};

// What a status carries. reason is empty and retry_delay unset when none was attached.
struct StatusDetails {
  std::vector<FieldViolation> field_violations;
  std::string reason;  // UPPER_SNAKE_CASE, stable for clients to branch on
  std::string domain;
  std::map<std::string, std::string> metadata;
  std::optional<absl::Duration> retry_delay;
};

// Each returns the status with the detail added (an OK status is returned unchanged).
absl::Status AddFieldViolation(absl::Status status, absl::string_view field,
                               absl::string_view description);
// Replaces any reason set before; domain kErrorDomain.
absl::Status SetErrorReason(absl::Status status, absl::string_view reason,
                            const std::map<std::string, std::string>& metadata = {});
absl::Status SetRetryDelay(absl::Status status, absl::Duration delay);

// The same code and details with another message (an OK status is returned unchanged).
absl::Status WithMessage(const absl::Status& status, absl::string_view message);

// Whether a reason or a retry hint is attached (without parsing the details).
bool HasErrorReason(const absl::Status& status);
bool HasRetryDelay(const absl::Status& status);

// The details attached to status (all empty for a status without any).
StatusDetails GetStatusDetails(const absl::Status& status);

// The reason an error gets when none was set: the code's name ("NOT_FOUND"). The retry hint a
// status gets when none was set: 1 s for UNAVAILABLE and ABORTED, none otherwise.
std::string DefaultErrorReason(absl::StatusCode code);
std::optional<absl::Duration> DefaultRetryDelay(absl::StatusCode code);

// Lines for people, e.g. "  field spec.epochs: must be in [1, 10000]", "  reason: QUOTA_EXCEEDED
// (running_jobs=4)", "  retry after 1s"; empty when the status carries nothing beyond a default
// reason.
std::vector<std::string> DescribeStatusDetails(const absl::Status& status);

}  // namespace gantry

#endif  // GANTRY_BASE_STATUS_DETAILS_H_
