// Tests of base/flags: Abseil flags with dashed or underscored names, positional arguments
// returned.
#include "base/flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_FLAG(std::string, data_dir, "unset", "a flag with an underscore in its name");
ABSL_FLAG(int, max_batch_size, 0, "another one");

namespace gantry {
namespace {

std::vector<std::string> Parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return ParseFlags(static_cast<int>(argv.size()), argv.data(), "test");
}

TEST(FlagsTest, DashedAndUnderscoredNamesSetTheSameFlag) {
  const std::vector<std::string> rest =
      Parse({"prog", "daemon", "--data-dir=/tmp/a-b", "--max_batch_size", "7", "extra"});
  EXPECT_EQ(absl::GetFlag(FLAGS_data_dir), "/tmp/a-b");  // dashes in the value are kept
  EXPECT_EQ(absl::GetFlag(FLAGS_max_batch_size), 7);
  EXPECT_EQ(rest, (std::vector<std::string>{"daemon", "extra"}));
}

TEST(FlagsTest, ArgumentsAfterDoubleDashAreLeftAlone) {
  const std::vector<std::string> rest = Parse({"prog", "--max-batch-size=3", "--", "--data-dir=x"});
  EXPECT_EQ(absl::GetFlag(FLAGS_max_batch_size), 3);
  EXPECT_EQ(rest, (std::vector<std::string>{"--data-dir=x"}));
}

}  // namespace
}  // namespace gantry
