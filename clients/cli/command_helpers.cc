#include "clients/cli/command_helpers.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace gantry::cli {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  return buffer.str();
}

absl::Status AddKeyValues(const ParsedArgs& args, const std::string& flag,
                          google::protobuf::Map<std::string, std::string>* map) {
  for (const std::string& text : args.GetAll(flag)) {
    ASSIGN_OR_RETURN(auto pair, ParseKeyValueFlag(flag, text));
    (*map)[pair.first] = pair.second;
  }
  return absl::OkStatus();
}

absl::StatusOr<int> IntFlagOr(const ParsedArgs& args, const std::string& flag, int fallback) {
  std::optional<std::string> text = args.Get(flag);
  if (!text.has_value()) return fallback;
  return ParseIntFlag(flag, *text);
}

}  // namespace gantry::cli
