// Connection: the channel to gantry-server (plain or TLS) and per-call contexts carrying the API
// token and a deadline.
#ifndef GANTRY_CLIENTS_CLI_CONNECTION_H_
#define GANTRY_CLIENTS_CLI_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "clients/cli/cli_config.h"

namespace gantry::cli {

// The token goes over TLS, or in clear only to this host: a plaintext channel that would carry a
// token to another host is FAILED_PRECONDITION unless config.allow_plaintext says the network is
// trusted. The message says how to connect instead.
absl::Status CheckTransport(const CliConfig& config);

class Connection {
 public:
  // Builds the channel from `config` (reads the CA bundle when ca_cert is set; CheckTransport
  // first). `timeout` is the deadline of ordinary calls. No network traffic happens until the first
  // call.
  static absl::StatusOr<std::unique_ptr<Connection>> Create(const CliConfig& config,
                                                            absl::Duration timeout);

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  const CliConfig& config() const { return config_; }
  // The request id this command sends with every call (x-request-id metadata; random, one per
  // Connection): the server logs its calls under it and returns it.
  const std::string& request_id() const { return request_id_; }

  // A context with the token and request id metadata and the ordinary call deadline.
  std::unique_ptr<grpc::ClientContext> NewContext() const;
  // A context for a long call: `deadline` from now, or none (nullopt) for streams that follow a
  // job.
  std::unique_ptr<grpc::ClientContext> NewLongContext(std::optional<absl::Duration> deadline) const;

  // Calls grpc.health.v1.Health/Check for `service` ("" = the whole server). Returns the serving
  // status name ("SERVING", "NOT_SERVING", "SERVICE_UNKNOWN", "UNKNOWN").
  absl::StatusOr<std::string> CheckHealth(const std::string& service) const;

 private:
  Connection(CliConfig config, std::shared_ptr<grpc::Channel> channel, absl::Duration timeout,
             std::string request_id)
      : config_(std::move(config)),
        channel_(std::move(channel)),
        timeout_(timeout),
        request_id_(std::move(request_id)) {}

  CliConfig config_;
  std::shared_ptr<grpc::Channel> channel_;
  absl::Duration timeout_;
  std::string request_id_;
};

// Converts a gRPC status to an absl::Status with the same code and message. A DEADLINE_EXCEEDED or
// UNAVAILABLE gets a hint naming the server address.
absl::Status FromGrpc(const grpc::Status& status, const std::string& server = "");

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_CONNECTION_H_
