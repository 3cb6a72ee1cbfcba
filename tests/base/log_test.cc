// The process log (base/log.h): levels filter, text lines carry a UTC timestamp, the level, the
// program and the fields, JSON lines parse as JSON objects, concurrent lines stay whole.
#include "base/log.h"

#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace gantry {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override { SetLogOutputForTesting(&out_); }
  void TearDown() override {
    SetLogOutputForTesting(nullptr);
    InitLogging({"log_test", LogLevel::kInfo, LogFormat::kText});
  }
  std::vector<std::string> Lines() const { return absl::StrSplit(out_, '\n', absl::SkipEmpty()); }
  std::string out_;
};

TEST_F(LogTest, LevelsBelowTheThresholdAreDropped) {
  InitLogging({"log_test", LogLevel::kWarning, LogFormat::kText});
  int evaluated = 0;
  GANTRY_LOG(DEBUG) << "debug " << ++evaluated;
  GANTRY_LOG(INFO) << "info " << ++evaluated;
  GANTRY_LOG(WARNING) << "warning";
  GANTRY_LOG(ERROR) << "error";
  EXPECT_EQ(evaluated, 0) << "arguments of dropped lines must not be evaluated";
  ASSERT_EQ(Lines().size(), 2u) << out_;
  EXPECT_NE(Lines()[0].find(" W log_test "), std::string::npos) << out_;
  EXPECT_NE(Lines()[1].find(" E log_test "), std::string::npos) << out_;

  InitLogging({"log_test", LogLevel::kDebug, LogFormat::kText});
  GANTRY_LOG(DEBUG) << "now debug";
  ASSERT_EQ(Lines().size(), 3u) << out_;
  EXPECT_NE(Lines()[2].find(" D log_test "), std::string::npos) << out_;
}

TEST_F(LogTest, TextLineCannotBeSplitOrForgedByItsContent) {
  InitLogging({"gantry-test", LogLevel::kInfo, LogFormat::kText});
  const std::string forged = "w1\n2026-01-01T00:00:00.000000Z E gantry-server 1 x.cc:1] forged";
  GANTRY_LOG(INFO).Field("worker", forged) << "worker " << forged << " \x1b]0;title\x07 joined";
  ASSERT_EQ(Lines().size(), 1u) << out_;
  EXPECT_NE(Lines()[0].find("worker w1\\n2026-01-01T"), std::string::npos) << out_;
  EXPECT_NE(Lines()[0].find("\\x1b]0;title\\x07 joined"), std::string::npos) << out_;
  EXPECT_NE(Lines()[0].find(" worker=\"w1\\n2026"), std::string::npos) << out_;
}

TEST_F(LogTest, TextLineHasTimestampLevelProgramSourceAndFields) {
  InitLogging({"gantry-test", LogLevel::kInfo, LogFormat::kText});
  GANTRY_LOG(INFO).Field("request_id", "r-1").Field("tenant", "two words") << "hello " << 42;
  ASSERT_EQ(Lines().size(), 1u) << out_;
  const std::regex line(
      R"(^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) I gantry-test \d+ log_test\.cc:\d+\] hello 42 )"
      R"(request_id=r-1 tenant="two words"$)");
  const std::string text = Lines()[0];  // the match refers to it
  std::smatch m;
  ASSERT_TRUE(std::regex_match(text, m, line)) << text;
  absl::Time stamp;
  std::string error;
  ASSERT_TRUE(absl::ParseTime(absl::RFC3339_full, m[1].str(), absl::UTCTimeZone(), &stamp, &error))
      << error;
  EXPECT_LT(absl::AbsDuration(absl::Now() - stamp), absl::Seconds(60)) << m[1].str();
}

TEST_F(LogTest, JsonLinesParseAsObjects) {
  InitLogging({"gantry-test", LogLevel::kInfo, LogFormat::kJson});
  GANTRY_LOG(ERROR).Field("code", "NOT_FOUND") << "quote \" backslash \\ newline \n tab \t end";
  GANTRY_LOG(INFO) << "second";
  ASSERT_EQ(Lines().size(), 2u) << out_;
  google::protobuf::Struct first;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(Lines()[0], &first).ok()) << Lines()[0];
  const auto& f = first.fields();
  EXPECT_EQ(f.at("level").string_value(), "error");
  EXPECT_EQ(f.at("program").string_value(), "gantry-test");
  EXPECT_EQ(f.at("msg").string_value(), "quote \" backslash \\ newline \n tab \t end");
  EXPECT_EQ(f.at("code").string_value(), "NOT_FOUND");
  EXPECT_EQ(f.at("file").string_value(), "log_test.cc");
  EXPECT_GT(f.at("line").number_value(), 0);
  EXPECT_GT(f.at("pid").number_value(), 0);
  EXPECT_TRUE(std::regex_match(f.at("ts").string_value(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)")))
      << f.at("ts").string_value();
  google::protobuf::Struct second;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(Lines()[1], &second).ok()) << Lines()[1];
  EXPECT_EQ(second.fields().at("level").string_value(), "info");
}

TEST_F(LogTest, ConcurrentLinesStayWhole) {
  InitLogging({"gantry-test", LogLevel::kInfo, LogFormat::kJson});
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) GANTRY_LOG(INFO).Field("t", std::to_string(t)) << "line " << i;
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_EQ(Lines().size(), 1600u);
  for (const std::string& line : Lines()) {
    google::protobuf::Struct parsed;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &parsed).ok()) << line;
  }
}

TEST(LogOptionsTest, ParsesLevelsAndFormatsAndNamesTheChoices) {
  EXPECT_EQ(*ParseLogLevel("WARNING"), LogLevel::kWarning);
  EXPECT_EQ(*ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  const auto bad = ParseLogLevel("loud");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("debug, info, warning or error"), std::string::npos);
  const auto bad_format = ParseLogFormat("xml");
  ASSERT_FALSE(bad_format.ok());
  EXPECT_NE(bad_format.status().message().find("--log-format"), std::string::npos);
}

}  // namespace
}  // namespace gantry
