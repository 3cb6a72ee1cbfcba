#include "clients/cli/connection.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/grpc_status.h"
#include "base/loopback.h"
#include "base/status_details.h"
#include "base/status_macros.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace gantry::cli {
namespace {

std::chrono::system_clock::time_point DeadlineFromNow(absl::Duration duration) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(duration);
}

}  // namespace

absl::Status CheckTransport(const CliConfig& config) {
  if (!config.ca_cert.empty() || config.token.empty() || config.allow_plaintext ||
      IsLoopbackTarget(config.server)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to send the API token in clear to ", config.server, " (server from ",
      config.server_source,
      "), which is not on this host: give the server's CA with --ca-cert "
      "(or GANTRY_CA_CERT) to use TLS, or --allow-plaintext (GANTRY_ALLOW_PLAINTEXT=1) on a "
      "trusted private network"));
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Create(const CliConfig& config,
                                                               absl::Duration timeout) {
  RETURN_IF_ERROR(CheckTransport(config));
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
  absl::BitGen random;
  const std::string request_id = absl::StrFormat("cli-%016x", absl::Uniform<uint64_t>(random));
  return std::unique_ptr<Connection>(
      new Connection(config, std::move(channel), timeout, request_id));
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
  context->AddMetadata("x-request-id", request_id_);
  return context;
}

absl::StatusOr<std::string> Connection::CheckHealth(const std::string& service) const {
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  auto context = NewContext();
  grpc::Status status =
      grpc::health::v1::Health::NewStub(channel_)->Check(context.get(), request, &response);
  if (!status.ok()) return FromGrpc(status, config_.server);
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
}

absl::Status FromGrpc(const grpc::Status& status, const std::string& server) {
  if (status.ok()) return absl::OkStatus();
  const absl::Status converted = FromGrpcStatus(status);
  const absl::StatusCode code = converted.code();
  std::string message(converted.message());
  if (!server.empty() &&
      (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded)) {
    absl::StrAppend(&message, " (server ", server, ")");
  }
  return WithMessage(converted, message);
}

}  // namespace gantry::cli
