#include "clients/cli/connection.h"

#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/byte_buffer.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gantry::cli {
namespace {

constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";

std::chrono::system_clock::time_point DeadlineFromNow(absl::Duration duration) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(duration);
}

// Reads a protobuf varint from `data` at `*pos`.
bool ReadVarint(const std::string& data, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *pos < data.size(); shift += 7) {
    uint8_t byte = static_cast<uint8_t>(data[(*pos)++]);
    *value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Connection>> Connection::Create(const CliConfig& config,
                                                               absl::Duration timeout) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (config.ca_cert.empty()) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    std::ifstream in(config.ca_cert);
    if (!in) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot read CA certificate ", config.ca_cert, " (from ", config.ca_cert_source, ")"));
    }
    std::stringstream pem;
    pem << in.rdbuf();
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = pem.str();
    credentials = grpc::SslCredentials(options);
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(64 << 20);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  auto channel = grpc::CreateCustomChannel(config.server, credentials, arguments);
  return std::unique_ptr<Connection>(new Connection(config, std::move(channel), timeout));
}

std::unique_ptr<grpc::ClientContext> Connection::NewContext() const {
  return NewLongContext(timeout_);
}

std::unique_ptr<grpc::ClientContext> Connection::NewLongContext(
    std::optional<absl::Duration> deadline) const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (deadline.has_value()) context->set_deadline(DeadlineFromNow(*deadline));
  if (!config_.token.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", config_.token));
  }
  return context;
}

absl::StatusOr<std::string> Connection::CheckHealth(const std::string& service) const {
  // HealthCheckRequest { string service = 1; } encoded by hand: the health proto is not part of the
  // installed gRPC headers, and this is the only message the CLI needs from it.
  std::string request_bytes;
  if (!service.empty()) {
    request_bytes.push_back(static_cast<char>(0x0A));  // field 1, length-delimited
    uint64_t length = service.size();
    while (length >= 0x80) {
      request_bytes.push_back(static_cast<char>((length & 0x7F) | 0x80));
      length >>= 7;
    }
    request_bytes.push_back(static_cast<char>(length));
    request_bytes += service;
  }
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  auto context = NewContext();
  grpc::internal::RpcMethod method(kHealthCheckMethod, grpc::internal::RpcMethod::NORMAL_RPC);
  grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel_.get(), method, context.get(), request, &response);
  if (!status.ok()) return FromGrpc(status, config_.server);

  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable health response");
  std::string bytes;
  for (const auto& part : slices) {
    bytes.append(reinterpret_cast<const char*>(part.begin()), part.size());
  }
  // HealthCheckResponse { ServingStatus status = 1; }: absent field = UNKNOWN (0).
  uint64_t serving = 0;
  size_t pos = 0;
  while (pos < bytes.size()) {
    uint64_t tag;
    if (!ReadVarint(bytes, &pos, &tag)) break;
    if (tag == 0x08) {
      if (!ReadVarint(bytes, &pos, &serving)) break;
    } else {
      return absl::InternalError("unexpected field in health response");
    }
  }
  switch (serving) {
    case 1:
      return std::string("SERVING");
    case 2:
      return std::string("NOT_SERVING");
    case 3:
      return std::string("SERVICE_UNKNOWN");
    default:
      return std::string("UNKNOWN");
  }
}

absl::Status FromGrpc(const grpc::Status& status, const std::string& server) {
  if (status.ok()) return absl::OkStatus();
  auto code = static_cast<absl::StatusCode>(status.error_code());
  std::string message = status.error_message();
  if (!server.empty() &&
      (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded)) {
    absl::StrAppend(&message, " (server ", server, ")");
  }
  return absl::Status(code, message);
}

}  // namespace gantry::cli
