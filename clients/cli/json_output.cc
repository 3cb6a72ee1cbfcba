#include "clients/cli/json_output.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace gantry::cli {

absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.add_whitespace = false;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot print JSON: ", std::string(status.message())));
  }
  return json;
}

absl::Status PrintJson(std::ostream& out, const google::protobuf::Message& message) {
  ASSIGN_OR_RETURN(std::string json, MessageToJson(message));
  out << json << '\n';
  return absl::OkStatus();
}

absl::Status PrintJsonArray(std::ostream& out,
                            const std::vector<const google::protobuf::Message*>& messages) {
  if (messages.empty()) {
    out << "[]\n";
    return absl::OkStatus();
  }
  std::string text = "[\n";
  for (size_t i = 0; i < messages.size(); ++i) {
    ASSIGN_OR_RETURN(std::string json, MessageToJson(*messages[i]));
    absl::StrAppend(&text, "  ", json, i + 1 < messages.size() ? ",\n" : "\n");
  }
  text += "]\n";
  out << text;
  return absl::OkStatus();
}

}  // namespace gantry::cli
