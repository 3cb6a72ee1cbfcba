// json_output: prints protobuf messages as protobuf JSON (one object, or an array) for scripts.
#ifndef GANTRY_CLIENTS_CLI_JSON_OUTPUT_H_
#define GANTRY_CLIENTS_CLI_JSON_OUTPUT_H_

#include <google/protobuf/message.h>
#include <google/protobuf/repeated_ptr_field.h>

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gantry::cli {

// Protobuf JSON (lowerCamelCase names, enums by name, 64-bit integers as strings), with primitive
// fields printed even when they hold their default, so scripts can rely on every field being
// present.
absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message);

// Writes one object followed by a newline.
absl::Status PrintJson(std::ostream& out, const google::protobuf::Message& message);

// Writes a JSON array of the messages (one per line) followed by a newline; "[]" when empty.
absl::Status PrintJsonArray(std::ostream& out,
                            const std::vector<const google::protobuf::Message*>& messages);

template <typename T>
absl::Status PrintJsonArray(std::ostream& out, const google::protobuf::RepeatedPtrField<T>& items) {
  std::vector<const google::protobuf::Message*> messages;
  for (const T& item : items) messages.push_back(&item);
  return PrintJsonArray(out, messages);
}

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_JSON_OUTPUT_H_
