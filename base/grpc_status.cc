#include "base/grpc_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace gantry {
namespace {

constexpr int kLastCode = 16;  // UNAUTHENTICATED, the last code of google.rpc.Code.

bool IsKnownCode(int code) { return code >= 0 && code <= kLastCode; }

// Messages often quote the offending value; a huge value must not make the status trailer exceed
// the client's metadata limit (8 KiB by default), which would hide the code behind
// RESOURCE_EXHAUSTED. Cut on a UTF-8 boundary.
std::string Bounded(absl::string_view message) {
  if (message.size() <= kMaxStatusMessageBytes) return std::string(message);
  size_t cut = kMaxStatusMessageBytes - 32;
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(message.substr(0, cut), "... (", message.size() - cut, " bytes cut)");
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  return grpc::Status(
      IsKnownCode(code) ? static_cast<grpc::StatusCode>(code) : grpc::StatusCode::UNKNOWN,
      Bounded(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  return absl::Status(
      IsKnownCode(code) ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown,
      status.error_message());
}

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view context) {
  if (status.ok()) return absl::OkStatus();
  const absl::Status converted = FromGrpcStatus(status);
  return absl::Status(converted.code(), absl::StrCat(context, ": ", converted.message()));
}

}  // namespace gantry
