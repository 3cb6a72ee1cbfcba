// ProtoToJson: a gantry.v1 message as JSON by the protobuf JSON mapping (lowerCamelCase names,
// enums by name, 64-bit integers as strings, fields without presence always printed), written
// directly through reflection: several times faster than MessageToJsonString, which converts
// through the binary format and a type resolver, on the catalog's 1,000-version pages.
#ifndef GANTRY_SERVER_HTTP_JSON_PRINTER_H_
#define GANTRY_SERVER_HTTP_JSON_PRINTER_H_

#include <string>

#include "google/protobuf/message.h"

namespace gantry::server::http {

// Well-known types other than Timestamp (Duration, Struct, FieldMask, ...) are printed by
// MessageToJsonString. The output parses back (JsonStringToMessage) into an equal message.
std::string ProtoToJson(const google::protobuf::Message& message);

}  // namespace gantry::server::http

#endif  // GANTRY_SERVER_HTTP_JSON_PRINTER_H_
