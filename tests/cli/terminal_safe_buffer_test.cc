// Tests of TerminalSafeBuffer and of Table's escaping: what reaches the terminal has no control
// characters, whatever the pieces it was written in.
#include "clients/cli/terminal_safe_buffer.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "clients/cli/table.h"

namespace gantry::cli {
namespace {

std::string ThroughBuffer(const std::vector<std::string>& writes) {
  std::ostringstream target;
  {
    TerminalSafeBuffer buffer(target.rdbuf());
    std::ostream out(&buffer);
    for (const std::string& w : writes) out << w << std::flush;
  }
  return target.str();
}

TEST(TerminalSafeBufferTest, EscapesControlsKeepsNewlinesAndTabs) {
  EXPECT_EQ(ThroughBuffer({"description: \x1b]0;owned\x07"
                           "fine\r\n",
                           "a\tb\n"}),
            "description: \\x1b]0;owned\\x07fine\\r\na\tb\n");
}

TEST(TerminalSafeBufferTest, MultibyteSplitAcrossWritesIsKept) {
  // "é" (C3 A9) and "€" (E2 82 AC) written a byte at a time, with flushes between.
  EXPECT_EQ(ThroughBuffer({"r\xc3", "\xa9", "sum\xe2", "\x82", "\xac\n"}),
            "r\xc3\xa9sum\xe2\x82\xac\n");
  // U+009B (C2 9B) split the same way is still a C1 control.
  EXPECT_EQ(ThroughBuffer({"x\xc2",
                           "\x9b"
                           "2J\n"}),
            "x\\u009b2J\n");
}

TEST(TerminalSafeBufferTest, UnfinishedSequenceAtTheEndIsEscaped) {
  EXPECT_EQ(ThroughBuffer({"end\xe2\x82"}), "end\\xe2\\x82");
}

TEST(TerminalSafeBufferTest, LongOutputPassesThrough) {
  const std::string line = std::string(10000, 'a') + "\n";
  EXPECT_EQ(ThroughBuffer({line, line}), line + line);
}

TEST(TableEscapingTest, CellsAreOneLineWithoutControls) {
  Table table({"NAME", "DESCRIPTION"});
  table.AddRow({"m\x1b[2J",
                "line one\nline two\r\xc2\x9b"
                "8m"});
  std::ostringstream out;
  table.Render(out);
  EXPECT_EQ(out.str(),
            "NAME      DESCRIPTION\n"
            "m\\x1b[2J  line one\\nline two\\r\\u009b8m\n");
}

}  // namespace
}  // namespace gantry::cli
