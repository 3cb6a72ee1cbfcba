// command_helpers: small helpers shared by the commands_*.cc files (files, key=value flags, stubs).
#ifndef GANTRY_CLIENTS_CLI_COMMAND_HELPERS_H_
#define GANTRY_CLIENTS_CLI_COMMAND_HELPERS_H_

#include <google/protobuf/map.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "clients/cli/command.h"

namespace gantry::cli {

// Reads a whole file; NOT_FOUND when it does not exist.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Adds every "k=v" value of the repeatable flag `flag` to `map`; a usage error names the flag.
absl::Status AddKeyValues(const ParsedArgs& args, const std::string& flag,
                          google::protobuf::Map<std::string, std::string>* map);

// An int flag's value, or `fallback` when absent; a usage error names the flag.
absl::StatusOr<int> IntFlagOr(const ParsedArgs& args, const std::string& flag, int fallback);

// Calls a unary RPC on the context's connection with the ordinary deadline and the token; a failure
// becomes the absl status that names the server, e.g.
//   RETURN_IF_ERROR(CallUnary(context, &v1::TrainingService::Stub::GetJob, request, &job));
template <typename Stub, typename Request, typename Response>
absl::Status CallUnary(CommandContext& context,
                       grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                                    Response*),
                       const Request& request, Response* response) {
  absl::StatusOr<Connection*> connection = context.connect();
  if (!connection.ok()) return connection.status();
  Stub stub((*connection)->channel());
  auto rpc = (*connection)->NewContext();
  return FromGrpc((stub.*method)(rpc.get(), request, response), (*connection)->config().server);
}

// The service stub on the context's connection (for streaming calls).
template <typename Service>
absl::StatusOr<std::unique_ptr<typename Service::Stub>> NewStub(CommandContext& context) {
  absl::StatusOr<Connection*> connection = context.connect();
  if (!connection.ok()) return connection.status();
  return Service::NewStub((*connection)->channel());
}

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_COMMAND_HELPERS_H_
