// JSON string literals for the few places that write JSON text by hand (log lines, SQL jsonb
// parameters, the export's generator description): quotes, backslash and control characters
// escaped; other bytes (UTF-8 included) pass through.
#ifndef GANTRY_BASE_JSON_STRING_H_
#define GANTRY_BASE_JSON_STRING_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gantry {

// Appends `text` as a quoted JSON string to `out`.
void AppendJsonString(std::string* out, absl::string_view text);

// `text` as a quoted JSON string.
std::string JsonString(absl::string_view text);

}  // namespace gantry

#endif  // GANTRY_BASE_JSON_STRING_H_
