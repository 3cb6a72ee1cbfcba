// Tests of ArgParser: flags, positionals and the errors that name what is wrong.
#include "clients/cli/arg_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gantry::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<FlagSpec> kFlags = {
    {"epochs", "N", "epochs"},
    {"label", "K=V", "labels", true},
    {"admin", "", "boolean"},
};
const std::vector<PositionalSpec> kOneId = {{"JOB_ID", "the job"}};

TEST(ArgParserTest, ParsesFlagsInBothFormsAndPositionals) {
  auto parsed =
      ParseArgs("jobs get", {"job-1", "--epochs", "5", "--label=a=b", "--label", "c=d", "--admin"},
                kFlags, kOneId);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Get("epochs"), "5");
  EXPECT_THAT(parsed->GetAll("label"), ElementsAre("a=b", "c=d"));
  EXPECT_TRUE(parsed->Has("admin"));
  EXPECT_EQ(parsed->Get("admin"), "true");
  EXPECT_THAT(parsed->positionals(), ElementsAre("job-1"));
  EXPECT_FALSE(parsed->Has("missing"));
  EXPECT_EQ(parsed->Get("missing"), std::nullopt);
}

TEST(ArgParserTest, DoubleDashEndsFlags) {
  auto parsed = ParseArgs("jobs get", {"--", "--epochs"}, kFlags, kOneId);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->positionals(), ElementsAre("--epochs"));
}

TEST(ArgParserTest, NegativeNumberIsPositional) {
  auto parsed = ParseArgs("x", {"-1"}, kFlags, {{"N", "n"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->positionals(), ElementsAre("-1"));
}

TEST(ArgParserTest, UnknownFlagIsUsageErrorNamingIt) {
  auto parsed = ParseArgs("jobs get", {"job-1", "--epoch", "5"}, kFlags, kOneId);
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(IsUsageError(parsed.status()));
  EXPECT_THAT(parsed.status().message(), HasSubstr("--epoch"));
  EXPECT_THAT(parsed.status().message(), HasSubstr("jobs get"));
}

TEST(ArgParserTest, SingleDashFlagIsRejected) {
  auto parsed = ParseArgs("jobs get", {"job-1", "-x"}, kFlags, kOneId);
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(IsUsageError(parsed.status()));
  EXPECT_THAT(parsed.status().message(), HasSubstr("'-x'"));
}

TEST(ArgParserTest, MissingValueIsUsageError) {
  auto parsed = ParseArgs("jobs get", {"job-1", "--epochs"}, kFlags, kOneId);
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(IsUsageError(parsed.status()));
  EXPECT_THAT(parsed.status().message(), HasSubstr("--epochs needs a value"));
}

TEST(ArgParserTest, RepeatedSingleFlagIsUsageError) {
  auto parsed = ParseArgs("jobs get", {"job-1", "--epochs", "1", "--epochs", "2"}, kFlags, kOneId);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("more than once"));
}

TEST(ArgParserTest, BooleanFlagRejectsValue) {
  auto parsed = ParseArgs("x", {"job-1", "--admin=yes"}, kFlags, kOneId);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("--admin takes no value"));
  auto off = ParseArgs("x", {"job-1", "--admin=false"}, kFlags, kOneId);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->Has("admin"));
}

TEST(ArgParserTest, MissingAndExtraPositionals) {
  auto missing = ParseArgs("jobs get", {}, kFlags, kOneId);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(IsUsageError(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr("missing JOB_ID"));
  auto extra = ParseArgs("jobs get", {"a", "b"}, kFlags, kOneId);
  ASSERT_FALSE(extra.ok());
  EXPECT_THAT(extra.status().message(), HasSubstr("unexpected argument 'b'"));
}

TEST(ArgParserTest, OptionalAndVariadicPositionals) {
  std::vector<PositionalSpec> specs = {{"MODEL", "m"}, {"KV", "tags", true, true}};
  auto parsed = ParseArgs("models tag", {"m:1", "a=1", "b=2", "c=3"}, {}, specs);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->positionals().size(), 4u);
  EXPECT_EQ(parsed->Positional(3), "c=3");
  EXPECT_EQ(parsed->Positional(9), "");
  EXPECT_TRUE(ParseArgs("models tag", {"m:1"}, {}, specs).ok());
}

TEST(ArgParserTest, ValueParsersNameTheFlag) {
  EXPECT_EQ(*ParseIntFlag("epochs", "12"), 12);
  EXPECT_EQ(*ParseIntFlag("priority", "-7"), -7);
  auto bad = ParseIntFlag("epochs", "ten");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(IsUsageError(bad.status()));
  EXPECT_EQ(bad.status().message(), "--epochs: 'ten' is not an integer");
  EXPECT_THAT(ParseIntFlag("epochs", "99999999999").status().message(), HasSubstr("out of range"));
  EXPECT_THAT(ParseIntFlag("batch", "1.5").status().message(), HasSubstr("--batch"));
  EXPECT_DOUBLE_EQ(*ParseDoubleFlag("lr", "2e-4"), 2e-4);
  EXPECT_THAT(ParseDoubleFlag("lr", "nan").status().message(), HasSubstr("--lr"));
  EXPECT_THAT(ParseDoubleFlag("lr", "inf").status().message(), HasSubstr("not a finite number"));
  EXPECT_EQ(*ParseUint64Flag("seed", "18446744073709551615"), 18446744073709551615ull);
  EXPECT_THAT(ParseUint64Flag("seed", "-1").status().message(), HasSubstr("--seed"));
  auto kv = ParseKeyValueFlag("label", "team=calo=x");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->first, "team");
  EXPECT_EQ(kv->second, "calo=x");
  EXPECT_THAT(ParseKeyValueFlag("label", "team").status().message(),
              HasSubstr("--label: 'team' is not of the form key=value"));
  EXPECT_FALSE(ParseKeyValueFlag("selector", "=x").ok());
}

TEST(ArgParserTest, UsageErrorIsDistinguishable) {
  EXPECT_TRUE(IsUsageError(UsageError("x")));
  EXPECT_FALSE(IsUsageError(absl::InvalidArgumentError("x")));
  EXPECT_FALSE(IsUsageError(absl::OkStatus()));
}

}  // namespace
}  // namespace gantry::cli
