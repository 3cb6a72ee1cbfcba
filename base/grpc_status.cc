#include "base/grpc_status.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/safe_text.h"
#include "base/status_details.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace gantry {
namespace {

constexpr int kLastCode = 16;  // UNAUTHENTICATED, the last code of google.rpc.Code.

bool IsKnownCode(int code) { return code >= 0 && code <= kLastCode; }

// Messages often quote the offending value; a huge value must not make the status trailer exceed
// the client's metadata limit (8 KiB by default), which would hide the code behind
// RESOURCE_EXHAUSTED. Cut on a UTF-8 boundary; control characters escaped, so a message is one line
// that cannot drive the terminal or forge the log it is shown in.
std::string Bounded(absl::string_view message) {
  return BoundedField(message, kMaxStatusMessageBytes - 32);
}

constexpr absl::string_view kTypeUrlPrefix = "type.googleapis.com/google.rpc.";
// A details trailer larger than this from a peer is ignored (the message and code still count).
constexpr size_t kMaxDetailsBytes = 64 << 10;

// google.rpc.Status for an error: code, message and details (the attached ones, a default
// ErrorInfo reason and RetryInfo when none were attached).
std::string SerializedDetails(absl::Status status, int code, const std::string& message) {
  if (!HasErrorReason(status)) {
    status = SetErrorReason(status, DefaultErrorReason(status.code()));
  }
  if (!HasRetryDelay(status)) {
    if (auto delay = DefaultRetryDelay(status.code())) status = SetRetryDelay(status, *delay);
  }
  google::rpc::Status rpc;
  rpc.set_code(code);
  rpc.set_message(message);
  status.ForEachPayload([&rpc](absl::string_view url, const absl::Cord& payload) {
    if (!absl::StartsWith(url, kTypeUrlPrefix)) return;
    google::protobuf::Any* any = rpc.add_details();
    any->set_type_url(std::string(url));
    any->set_value(std::string(payload));
  });
  return rpc.SerializeAsString();
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int raw = static_cast<int>(status.code());
  const grpc::StatusCode code =
      IsKnownCode(raw) ? static_cast<grpc::StatusCode>(raw) : grpc::StatusCode::UNKNOWN;
  std::string message = Bounded(status.message());
  std::string details = SerializedDetails(status, static_cast<int>(code), message);
  return grpc::Status(code, std::move(message), std::move(details));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  absl::Status converted(
      IsKnownCode(code) ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown,
      status.error_message());
  google::rpc::Status rpc;
  if (!status.error_details().empty() && status.error_details().size() <= kMaxDetailsBytes &&
      rpc.ParseFromString(status.error_details())) {
    for (const google::protobuf::Any& any : rpc.details()) {
      if (absl::StartsWith(any.type_url(), kTypeUrlPrefix)) {
        converted.SetPayload(any.type_url(), absl::Cord(any.value()));
      }
    }
  }
  return converted;
}

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view context) {
  if (status.ok()) return absl::OkStatus();
  const absl::Status converted = FromGrpcStatus(status);
  return WithMessage(converted, absl::StrCat(context, ": ", converted.message()));
}

}  // namespace gantry
