#include "base/safe_text.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gantry {
namespace {

// The length of the valid UTF-8 sequence at the start of `text` and its code point; 0 when the
// first byte does not start one (overlong forms, surrogates and values past U+10FFFF are invalid).
size_t DecodeUtf8(absl::string_view text, uint32_t* code_point) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) {
    *code_point = lead;
    return 1;
  }
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
  }
  uint32_t value = lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) value = (value << 6) | (byte(i) & 0x3F);
  *code_point = value;
  return length;
}

bool IsBidiControl(uint32_t c) {
  return (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

// The escaped form of the character at the start of `text` (non-empty), and how many bytes of
// `text` it stands for.
std::string NextPiece(absl::string_view text, LineBreaks line_breaks, size_t* consumed) {
  uint32_t c = 0;
  const size_t length = DecodeUtf8(text, &c);
  if (length == 0) {
    *consumed = 1;
    return absl::StrFormat("\\x%02x", static_cast<unsigned char>(text[0]));
  }
  *consumed = length;
  if (c == '\n' || c == '\t') {
    if (line_breaks == LineBreaks::kKeep) return std::string(1, static_cast<char>(c));
    return c == '\n' ? "\\n" : "\\t";
  }
  if (c == '\r') return "\\r";
  if (c < 0x20 || c == 0x7F) return absl::StrFormat("\\x%02x", c);
  if ((c >= 0x80 && c <= 0x9F) || IsBidiControl(c)) return absl::StrFormat("\\u%04x", c);
  return std::string(text.substr(0, length));
}

}  // namespace

std::string EscapeControlText(absl::string_view text, LineBreaks line_breaks) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    size_t consumed = 0;
    out += NextPiece(text, line_breaks, &consumed);
    text.remove_prefix(consumed);
  }
  return out;
}

std::string BoundedField(absl::string_view text, size_t max_bytes) {
  std::string out;
  while (!text.empty()) {
    size_t consumed = 0;
    std::string piece = NextPiece(text, LineBreaks::kEscape, &consumed);
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    text.remove_prefix(consumed);
  }
  if (!text.empty()) absl::StrAppend(&out, "...(", text.size(), " more bytes)");
  return out;
}

}  // namespace gantry
