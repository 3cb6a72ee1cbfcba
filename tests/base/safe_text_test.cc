// Tests of EscapeControlText and BoundedField (base/safe_text.h).
#include "base/safe_text.h"

#include <gtest/gtest.h>

#include <string>

namespace gantry {
namespace {

struct EscapeCase {
  const char* name;
  std::string text;
  std::string escaped;
};

TEST(SafeTextTest, EscapeControlTextTable) {
  const EscapeCase cases[] = {
      {"plain ASCII", "electrons, final", "electrons, final"},
      {"backslash kept", "a\\b", "a\\b"},
      {"CSI clear screen", "\x1b[2J\x1b[Hhi", "\\x1b[2J\\x1b[Hhi"},
      {"OSC window title", "\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"},
      {"colour hiding text", "ok\x1b[8msecret\x1b[0m", "ok\\x1b[8msecret\\x1b[0m"},
      {"carriage return overwrite", "evil\rgood", "evil\\rgood"},
      {"bell", "ding\a", "ding\\x07"},
      {"newline and tab", "a\nb\tc", "a\\nb\\tc"},
      {"NUL", std::string("a\0b", 3), "a\\x00b"},
      {"DEL", "a\x7f", "a\\x7f"},
      {"backspace", "abc\b\b\bxyz", "abc\\x08\\x08\\x08xyz"},
      {"C1 CSI U+009B in UTF-8",
       "\xc2\x9b"
       "31mred",
       "\\u009b31mred"},
      {"C1 NEL U+0085",
       "a\xc2\x85"
       "b",
       "a\\u0085b"},
      {"bidi override U+202E",
       "abc\xe2\x80\xae"
       "fed",
       "abc\\u202efed"},
      {"bidi isolate U+2066", "\xe2\x81\xa6x", "\\u2066x"},
      {"two-byte UTF-8 kept", "r\xc3\xa9sum\xc3\xa9", "r\xc3\xa9sum\xc3\xa9"},
      {"three-byte UTF-8 kept", "\xe2\x82\xac 5 \xe5\xbc\xa0", "\xe2\x82\xac 5 \xe5\xbc\xa0"},
      {"four-byte UTF-8 kept", "\xf0\x9f\x94\xa5", "\xf0\x9f\x94\xa5"},
      {"no-break space kept",
       "a\xc2\xa0"
       "b",
       "a\xc2\xa0"
       "b"},
      {"stray continuation byte",
       "a\x80"
       "b",
       "a\\x80b"},
      {"lone 0xff", "\xff", "\\xff"},
      {"truncated sequence", "x\xe2\x82", "x\\xe2\\x82"},
      {"overlong ESC (C0 9B)", "\xc0\x9b", "\\xc0\\x9b"},
      {"overlong slash", "\xe0\x80\xaf", "\\xe0\\x80\\xaf"},
      {"UTF-16 surrogate", "\xed\xa0\x80", "\\xed\\xa0\\x80"},
      {"past U+10FFFF", "\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},
      {"invalid then valid", "\xc3(\xc3\xa9", "\\xc3(\xc3\xa9"},
  };
  for (const EscapeCase& c : cases) {
    EXPECT_EQ(EscapeControlText(c.text), c.escaped) << c.name;
  }
}

TEST(SafeTextTest, KeepLineBreaksKeepsOnlyNewlineAndTab) {
  EXPECT_EQ(EscapeControlText("a\nb\tc\r\x1b[1A", LineBreaks::kKeep), "a\nb\tc\\r\\x1b[1A");
}

TEST(SafeTextTest, EscapedTextHasNoControlBytes) {
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
  const std::string escaped = EscapeControlText(every_byte);
  for (unsigned char c : escaped) {
    EXPECT_TRUE(c >= 0x20 && c != 0x7f && c < 0x80) << static_cast<int>(c);
  }
  EXPECT_EQ(EscapeControlText(escaped), escaped);  // escaping twice changes nothing more
}

struct BoundCase {
  const char* name;
  std::string text;
  size_t max_bytes;
  std::string bounded;
};

TEST(SafeTextTest, BoundedFieldTable) {
  const BoundCase cases[] = {
      {"short kept", "toymc:events=100", 128, "toymc:events=100"},
      {"empty", "", 128, ""},
      {"exactly the bound", std::string(128, 'a'), 128, std::string(128, 'a')},
      {"one over", std::string(129, 'a'), 128, std::string(128, 'a') + "...(1 more bytes)"},
      {"a megabyte", std::string(1 << 20, 'n'), 16,
       std::string(16, 'n') + "...(1048560 more bytes)"},
      {"forged log line", "w1\n2026-01-01T00:00:00Z E gantry-server 1 x.cc:1] root shell", 128,
       "w1\\n2026-01-01T00:00:00Z E gantry-server 1 x.cc:1] root shell"},
      {"escape counted in the bound", "ab\x1b[2J", 6, "ab\\x1b...(3 more bytes)"},
      {"escape not split", "abcd\x1b", 6, "abcd...(1 more bytes)"},
      {"multibyte not split", "abcde\xc3\xa9", 6, "abcde...(2 more bytes)"},
  };
  for (const BoundCase& c : cases) {
    EXPECT_EQ(BoundedField(c.text, c.max_bytes), c.bounded) << c.name;
  }
}

TEST(SafeTextTest, BoundedFieldDefaultIs128Bytes) {
  std::string expected;
  for (int i = 0; i < 64; ++i) expected += "\\n";
  EXPECT_EQ(BoundedField(std::string(5000, '\n')), expected + "...(4936 more bytes)");
}

}  // namespace
}  // namespace gantry
