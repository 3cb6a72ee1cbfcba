// Safe text: text that others wrote (tenants, workers, request fields) made harmless to print on a
// terminal or to put into a log line or an error message. Control characters, C1 controls, bidi
// controls and invalid UTF-8 are shown as escapes, so the text cannot move a terminal's cursor,
// change its title, hide what follows or forge a log line; valid UTF-8 passes through.
#ifndef GANTRY_BASE_SAFE_TEXT_H_
#define GANTRY_BASE_SAFE_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace gantry {

// Whether EscapeControlText keeps newlines and tabs (multi-line text for people) or escapes them
// (one cell, one log field, one message).
enum class LineBreaks { kEscape, kKeep };

// `text` with "\n", "\r", "\t" for those characters, "\x1b" for other C0 controls and DEL, "\u009b"
// for C1 controls (U+0080..U+009F) and bidi controls (U+202A..U+202E, U+2066..U+2069), and "\xff"
// for each byte that is not part of valid UTF-8. A backslash is left as it is.
std::string EscapeControlText(absl::string_view text, LineBreaks line_breaks = LineBreaks::kEscape);

inline constexpr size_t kBoundedFieldBytes = 128;

// A request-provided field for an error message or a log line: escaped as EscapeControlText does
// (line breaks too, so it stays on one line) and cut, on a character boundary, so the escaped text
// is at most `max_bytes` long, followed by "...(N more bytes)" naming how much of `text` was cut.
std::string BoundedField(absl::string_view text, size_t max_bytes = kBoundedFieldBytes);

}  // namespace gantry

#endif  // GANTRY_BASE_SAFE_TEXT_H_
