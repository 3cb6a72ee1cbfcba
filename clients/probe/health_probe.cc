// gantry-health-probe: asks a gRPC server's grpc.health.v1 Check for one service and exits 0 only
// when it answers SERVING. Container health checks run it; it needs no token and no database.
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace {

constexpr const char* kUsage =
    "usage: gantry-health-probe HOST:PORT [SERVICE] [--timeout-ms N] [--ca-cert FILE]\n"
    "  Exits 0 when SERVICE (default \"\": the whole server) is SERVING, 1 when it is not or the\n"
    "  server does not answer within --timeout-ms (default 3000), 2 on bad arguments.\n"
    "  --ca-cert FILE: talk TLS, trusting FILE's CA (default: plaintext).\n";

int BadArguments(const std::string& what) {
  std::cerr << "gantry-health-probe: " << what << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string target;
  std::string service;
  std::string ca_cert_file;
  int timeout_ms = 3000;
  int positional = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--timeout-ms" || arg == "--ca-cert") {
      if (i + 1 >= argc) return BadArguments(arg + " needs a value");
      const std::string value = argv[++i];
      if (arg == "--ca-cert") {
        ca_cert_file = value;
      } else if (!absl::SimpleAtoi(value, &timeout_ms) || timeout_ms <= 0) {
        return BadArguments("--timeout-ms must be a positive number of milliseconds, not '" +
                            value + "'");
      }
      continue;
    }
    if (absl::StartsWith(arg, "--")) return BadArguments("unknown flag " + arg);
    if (positional == 0) {
      target = arg;
    } else if (positional == 1) {
      service = arg;
    } else {
      return BadArguments("too many arguments");
    }
    ++positional;
  }
  if (target.empty() || !absl::StrContains(target, ':')) {
    return BadArguments("give the server as HOST:PORT");
  }

  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!ca_cert_file.empty()) {
    std::ifstream in(ca_cert_file);
    if (!in) return BadArguments("cannot read --ca-cert " + ca_cert_file);
    std::ostringstream pem;
    pem << in.rdbuf();
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = pem.str();
    credentials = grpc::SslCredentials(options);
  }
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(target, credentials));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    std::cerr << "gantry-health-probe: " << target << " service '" << service
              << "': " << status.error_message() << " (gRPC code " << status.error_code() << ")\n";
    return 1;
  }
  const std::string name =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  std::cout << name << "\n";
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}
