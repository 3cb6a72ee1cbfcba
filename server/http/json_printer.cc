#include "server/http/json_printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/json_string.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/timestamp.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

namespace gantry::server::http {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The shortest of %.{digits}g and %.17g (%.9g for float) that reads back exactly; NaN and the
// infinities as the JSON mapping's strings.
void AppendFloating(std::string* out, double value, bool is_float) {
  if (std::isnan(value)) {
    out->append("\"NaN\"");
    return;
  }
  if (std::isinf(value)) {
    out->append(value > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return;
  }
  char buffer[40];
  if (is_float) {
    std::snprintf(buffer, sizeof(buffer), "%.6g", value);
    if (std::strtof(buffer, nullptr) != static_cast<float>(value)) {
      std::snprintf(buffer, sizeof(buffer), "%.9g", value);
    }
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.15g", value);
    if (std::strtod(buffer, nullptr) != value)
      std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  }
  out->append(buffer);
}

void AppendMessage(std::string* out, const Message& message);

// One value of `field` (index -1: the singular field).
void AppendValue(std::string* out, const Message& message, const FieldDescriptor* field,
                 int index) {
  const Reflection* r = message.GetReflection();
  const bool repeated = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      absl::StrAppend(
          out, repeated ? r->GetRepeatedInt32(message, field, index) : r->GetInt32(message, field));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      absl::StrAppend(out, repeated ? r->GetRepeatedUInt32(message, field, index)
                                    : r->GetUInt32(message, field));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      absl::StrAppend(
          out, "\"",
          repeated ? r->GetRepeatedInt64(message, field, index) : r->GetInt64(message, field),
          "\"");
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      absl::StrAppend(
          out, "\"",
          repeated ? r->GetRepeatedUInt64(message, field, index) : r->GetUInt64(message, field),
          "\"");
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      AppendFloating(
          out,
          repeated ? r->GetRepeatedDouble(message, field, index) : r->GetDouble(message, field),
          false);
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      AppendFloating(
          out, repeated ? r->GetRepeatedFloat(message, field, index) : r->GetFloat(message, field),
          true);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      out->append(
          (repeated ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field))
              ? "true"
              : "false");
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int number = repeated ? r->GetRepeatedEnumValue(message, field, index)
                                  : r->GetEnumValue(message, field);
      const auto* value = field->enum_type()->FindValueByNumber(number);
      if (value != nullptr) {
        AppendJsonString(out, value->name());
      } else {
        absl::StrAppend(out, number);  // an unknown value keeps its number
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string scratch;
      const std::string& text = repeated
                                    ? r->GetRepeatedStringReference(message, field, index, &scratch)
                                    : r->GetStringReference(message, field, &scratch);
      if (field->type() == FieldDescriptor::TYPE_BYTES) {
        AppendJsonString(out, absl::Base64Escape(text));
      } else {
        AppendJsonString(out, text);
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      AppendMessage(out, repeated ? r->GetRepeatedMessage(message, field, index)
                                  : r->GetMessage(message, field));
      break;
  }
}

// A map key as a JSON object key (always a string).
void AppendMapKey(std::string* out, const Message& entry, const FieldDescriptor* key) {
  if (key->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    std::string scratch;
    AppendJsonString(out, entry.GetReflection()->GetStringReference(entry, key, &scratch));
    return;
  }
  std::string text;
  AppendValue(&text, entry, key, -1);
  if (!text.empty() && text.front() == '"') {
    out->append(text);  // 64-bit keys are quoted already
    return;
  }
  AppendJsonString(out, text);
}

void AppendMessage(std::string* out, const Message& message) {
  const google::protobuf::Descriptor* descriptor = message.GetDescriptor();
  if (descriptor->full_name() == "google.protobuf.Timestamp") {
    AppendJsonString(out, google::protobuf::util::TimeUtil::ToString(
                              static_cast<const google::protobuf::Timestamp&>(message)));
    return;
  }
  if (absl::StartsWith(descriptor->full_name(), "google.protobuf.")) {
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.always_print_primitive_fields = true;
    if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) json = "null";
    out->append(json);
    return;
  }
  const Reflection* r = message.GetReflection();
  out->push_back('{');
  bool first = true;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (!field->is_repeated() && field->has_presence() && !r->HasField(message, field)) continue;
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(out, field->json_name());
    out->push_back(':');
    if (field->is_map()) {
      const FieldDescriptor* key = field->message_type()->map_key();
      const FieldDescriptor* value = field->message_type()->map_value();
      out->push_back('{');
      const int n = r->FieldSize(message, field);
      for (int j = 0; j < n; ++j) {
        const Message& entry = r->GetRepeatedMessage(message, field, j);
        if (j > 0) out->push_back(',');
        AppendMapKey(out, entry, key);
        out->push_back(':');
        AppendValue(out, entry, value, -1);
      }
      out->push_back('}');
    } else if (field->is_repeated()) {
      out->push_back('[');
      const int n = r->FieldSize(message, field);
      for (int j = 0; j < n; ++j) {
        if (j > 0) out->push_back(',');
        AppendValue(out, message, field, j);
      }
      out->push_back(']');
    } else {
      AppendValue(out, message, field, -1);
    }
  }
  out->push_back('}');
}

}  // namespace

std::string ProtoToJson(const Message& message) {
  std::string out;
  out.reserve(256);
  AppendMessage(&out, message);
  return out;
}

}  // namespace gantry::server::http
