// MarkdownReference: the command table as Markdown (docs/CLI.md).
#include "clients/cli/reference.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "clients/cli/cli_app.h"
#include "gtest/gtest.h"

namespace gantry::cli {
namespace {

absl::Status Noop(CommandContext&) { return absl::OkStatus(); }

TEST(MarkdownReferenceTest, EveryCommandHasAnIndexRowAndASection) {
  const std::vector<Command> commands = AllCommands();
  const std::string md = MarkdownReference(commands, GlobalFlags());
  for (const Command& command : commands) {
    const std::string path = absl::StrJoin(command.path, " ");
    const std::string anchor = absl::StrCat("gantry-", absl::StrJoin(command.path, "-"));
    EXPECT_TRUE(absl::StrContains(md, absl::StrCat("| [`", path, "`](#", anchor, ") |"))) << path;
    EXPECT_TRUE(absl::StrContains(md, absl::StrCat("\n### gantry ", path, "\n"))) << path;
    EXPECT_TRUE(absl::StrContains(md, absl::StrCat("```\n", UsageLine(command), "\n```"))) << path;
    for (const FlagSpec& flag : command.flags) {
      EXPECT_TRUE(absl::StrContains(md, absl::StrCat("| `--", flag.name)))
          << path << " --" << flag.name;
    }
  }
  for (const FlagSpec& flag : GlobalFlags()) {
    EXPECT_TRUE(absl::StrContains(md, absl::StrCat("| `--", flag.name))) << flag.name;
  }
}

TEST(MarkdownReferenceTest, TableCellsKeepTheirColumns) {
  const std::vector<Command> commands = {
      {{"demo", "run"},
       "Run a demo",
       "First line\nsecond line.",
       {{"FILE", "input | output", true, false}},
       {{"energy", "GEV|MIN:MAX", "one energy\nor a range", true}, {"quiet", "", "no bar"}},
       Noop}};
  const std::string md = MarkdownReference(commands, {});
  EXPECT_TRUE(
      absl::StrContains(md, "| `--energy GEV\\|MIN:MAX` | one energy or a range (repeatable) |"))
      << md;
  EXPECT_TRUE(absl::StrContains(md, "| `--quiet` | no bar |")) << md;
  EXPECT_TRUE(absl::StrContains(md, "| `FILE` | input \\| output (optional) |")) << md;
  EXPECT_TRUE(absl::StrContains(
      md, "```\ngantry demo run [FILE] [flags]\n```\n\nFirst line\nsecond line.\n"))
      << md;
  // Every table row has as many unescaped pipes as its header.
  for (absl::string_view line : absl::StrSplit(md, '\n')) {
    if (!absl::StartsWith(line, "| ")) continue;
    int pipes = 0;
    for (size_t i = 0; i < line.size(); ++i)
      pipes += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    EXPECT_EQ(pipes, 3) << line;
  }
}

TEST(MarkdownReferenceTest, SameTableSameBytes) {
  EXPECT_EQ(MarkdownReference(AllCommands(), GlobalFlags()),
            MarkdownReference(AllCommands(), GlobalFlags()));
}

}  // namespace
}  // namespace gantry::cli
