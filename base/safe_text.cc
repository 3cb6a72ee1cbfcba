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

// Appends to `out` the escaped form of the character at the start of `text` (non-empty); returns
// how many bytes of `text` it stands for. Appends in place: every log line and status message
// passes through here.
size_t AppendPiece(absl::string_view text, LineBreaks line_breaks, std::string* out) {
  uint32_t c = 0;
  const size_t length = DecodeUtf8(text, &c);
  if (length == 0) {
    absl::StrAppendFormat(out, "\\x%02x", static_cast<unsigned char>(text[0]));
    return 1;
  }
  if (c == '\n' || c == '\t') {
    if (line_breaks == LineBreaks::kKeep) {
      out->push_back(static_cast<char>(c));
    } else {
      out->append(c == '\n' ? "\\n" : "\\t");
    }
  } else if (c == '\r') {
    out->append("\\r");
  } else if (c < 0x20 || c == 0x7F) {
    absl::StrAppendFormat(out, "\\x%02x", c);
  } else if ((c >= 0x80 && c <= 0x9F) || IsBidiControl(c)) {
    absl::StrAppendFormat(out, "\\u%04x", c);
  } else {
    out->append(text.data(), length);
  }
  return length;
}

}  // namespace

std::string EscapeControlText(absl::string_view text, LineBreaks line_breaks) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) text.remove_prefix(AppendPiece(text, line_breaks, &out));
  return out;
}

std::string BoundedField(absl::string_view text, size_t max_bytes) {
  std::string out;
  while (!text.empty()) {
    const size_t before = out.size();
    const size_t consumed = AppendPiece(text, LineBreaks::kEscape, &out);
    if (out.size() > max_bytes) {
      out.resize(before);  // the piece does not fit whole
      break;
    }
    text.remove_prefix(consumed);
  }
  if (!text.empty()) absl::StrAppend(&out, "...(", text.size(), " more bytes)");
  return out;
}

}  // namespace gantry
