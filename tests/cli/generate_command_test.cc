// Tests of `gantry generate`'s command line: every malformed combination is a usage error (exit 2)
// reported before any connection is made (no server runs here; a request that parses fails with
// UNAVAILABLE instead), and --help documents the issue's form.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "clients/cli/cli_app.h"

namespace gantry::cli {
namespace {

using ::testing::HasSubstr;

struct Result {
  int code;
  std::string err;
};

Result RunGenerate(std::vector<std::string> args) {
  ConfigEnvironment env;
  // Port 1 on loopback: nothing listens, so a well-formed request reaches UNAVAILABLE.
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    if (name == "GANTRY_SERVER") return "127.0.0.1:1";
    return std::nullopt;
  };
  env.read_config = [](const std::string& path) -> absl::StatusOr<ConfigFileRead> {
    return absl::NotFoundError(path);
  };
  CliApp app(AllCommands(), env);
  args.insert(args.begin(), "generate");
  args.push_back("--timeout");
  args.push_back("5");
  std::ostringstream out, err;
  const int code = app.Run(args, out, err, false);
  return {code, err.str()};
}

TEST(GenerateCommandTest, BadArgumentsAreUsageErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"m:1", "--energy", "10:500"}, "needs --count N"},
      {{"m:1", "--energy", "500:10", "--count", "3"}, "MIN greater than MAX"},
      {{"m:1", "--energy", "10:20:30", "--count", "3"}, "MIN:MAX"},
      {{"m:1", "--energy", "ten:500", "--count", "3"}, "--energy"},
      {{"m:1", "--energy", "10:500", "--count", "0"}, "--count: must be positive"},
      {{"m:1", "--energy", "10:500", "--count", "many"}, "--count"},
      {{"m:1", "--energy", "10:500", "--energy", "20", "--count", "2"}, "only once"},
      {{"m:1", "--energy", "10:500", "--energy-range", "1:2", "--count", "2"}, "--energy-range"},
      {{"m:1", "--energy", "10:500", "--count", "2", "--angle", "1:2", "--theta", "1"}, "not both"},
      {{"m:1", "--energy", "100", "--angle", "1:2"}, "--angle MIN:MAX goes with"},
      {{"m:1", "--energy", "100", "--energy", "200", "--count", "2"}, "--count with a list"},
      {{"m:1", "--energy", "100", "--energy", "200", "--theta", "1", "--theta", "2", "--theta",
        "3"},
       "one per --energy"},
      {{"m:1", "--energy", "10:500", "--count", "5", "--out", "a.h5", "--output", "b.h5"},
       "--out or --output"},
      {{"m:1", "--energy", "10:500", "--count", "5", "--particle", "muon"}, "--particle"},
      {{"m:1", "--energy", "10:500", "--count", "5", "--seed", "-3"}, "--seed"},
      {{"m:1", "--energy", "10:500", "--count", "5", "--quiet", "yes"}, ""},
  };
  for (const auto& [args, message] : cases) {
    const Result r = RunGenerate(args);
    EXPECT_EQ(r.code, kExitUsage) << ::testing::PrintToString(args) << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("gantry: usage: ")) << ::testing::PrintToString(args);
    EXPECT_THAT(r.err, HasSubstr(message)) << ::testing::PrintToString(args);
  }
}

TEST(GenerateCommandTest, WellFormedRequestsReachTheServer) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"m:1", "--energy", "10:500", "--count", "100000", "--angle",
                                 "1.0:2.0", "--seed", "7", "--out", "/tmp/never-written.h5"},
        std::vector<std::string>{"m@prod", "--energy", "100", "--count", "3", "--quiet"},
        std::vector<std::string>{"m:1", "--energy", "100", "--energy", "200", "--theta", "1.5"},
        std::vector<std::string>{"m:1", "--energy-range", "10:20", "--theta-range", "1:2",
                                 "--count", "4", "--output", "x.npy"},
        std::vector<std::string>{"m:1", "--count", "10"}}) {
    const Result r = RunGenerate(args);
    EXPECT_EQ(r.code, kExitError) << ::testing::PrintToString(args) << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("gantry: UNAVAILABLE: ")) << ::testing::PrintToString(args);
  }
}

TEST(GenerateCommandTest, HelpShowsTheIssueForm) {
  ConfigEnvironment env;
  env.getenv = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  env.read_config = [](const std::string& path) -> absl::StatusOr<ConfigFileRead> {
    return absl::NotFoundError(path);
  };
  CliApp app(AllCommands(), env);
  std::ostringstream out, err;
  ASSERT_EQ(app.Run({"generate", "--help"}, out, err, false), kExitOk);
  for (const char* flag : {"--energy", "--count", "--angle", "--seed", "--out", "--quiet"}) {
    EXPECT_THAT(out.str(), HasSubstr(flag));
  }
  EXPECT_THAT(out.str(), HasSubstr(".part"));
}

}  // namespace
}  // namespace gantry::cli
