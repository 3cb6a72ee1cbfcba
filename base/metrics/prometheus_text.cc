#include "base/metrics/prometheus_text.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gantry::metrics {
namespace {

bool IsNameStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }
bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }

// The length of the valid UTF-8 sequence at the start of `s`, 0 when it is not one.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t min = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() < length) return 0;
  uint32_t code = lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

// Appends `text` with backslash and line feed escaped (and double quotes when `quotes`),
// invalid UTF-8 replaced by U+FFFD.
void AppendEscaped(absl::string_view text, bool quotes, std::string* out) {
  while (!text.empty()) {
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) {
      out->append("\xEF\xBF\xBD");
      text.remove_prefix(1);
      continue;
    }
    if (length == 1) {
      const char c = text[0];
      if (c == '\\') {
        out->append("\\\\");
      } else if (c == '\n') {
        out->append("\\n");
      } else if (c == '"' && quotes) {
        out->append("\\\"");
      } else {
        out->push_back(c);
      }
    } else {
      out->append(text.data(), length);
    }
    text.remove_prefix(length);
  }
}

}  // namespace

bool IsValidMetricName(absl::string_view name) {
  if (name.empty() || !(IsNameStart(name[0]) || name[0] == ':')) return false;
  for (const char c : name) {
    if (!IsNameChar(c) && c != ':') return false;
  }
  return true;
}

bool IsValidLabelName(absl::string_view name) {
  if (name.empty() || !IsNameStart(name[0])) return false;
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') return false;
  if (name == "le" || name == "quantile") return false;
  for (const char c : name) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  AppendEscaped(value, /*quotes=*/true, &out);
  return out;
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  out.reserve(help.size());
  AppendEscaped(help, /*quotes=*/false, &out);
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Whole numbers within the exactly representable range print without a fraction or exponent.
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    return absl::StrFormat("%.0f", value);
  }
  // The shortest of 15 and 17 significant digits that reads back as the same double.
  std::string text = absl::StrFormat("%.15g", value);
  if (std::strtod(text.c_str(), nullptr) != value) text = absl::StrFormat("%.17g", value);
  return text;
}

std::string FormatLabels(const std::vector<std::pair<std::string, std::string>>& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out.push_back(',');
    absl::StrAppend(&out, labels[i].first, "=\"");
    AppendEscaped(labels[i].second, /*quotes=*/true, &out);
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

}  // namespace gantry::metrics
