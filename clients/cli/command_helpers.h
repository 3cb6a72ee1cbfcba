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

// The service stub on the context's connection.
template <typename Service>
absl::StatusOr<std::unique_ptr<typename Service::Stub>> NewStub(CommandContext& context) {
  absl::StatusOr<Connection*> connection = context.connect();
  if (!connection.ok()) return connection.status();
  return Service::NewStub((*connection)->channel());
}

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_COMMAND_HELPERS_H_
