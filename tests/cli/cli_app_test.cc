// Tests of CliApp: command lookup, help, global flags, usage errors (exit 2) and error printing.
#include "clients/cli/cli_app.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

namespace gantry::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ConfigEnvironment EmptyEnvironment(std::map<std::string, std::string> env = {}) {
  ConfigEnvironment e;
  e.getenv = [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  e.read_config = [](const std::string& path) -> absl::StatusOr<ConfigFileRead> {
    return absl::NotFoundError(path);
  };
  return e;
}

struct Result {
  int code;
  std::string out;
  std::string err;
};

// A small command table whose handlers record what they saw.
class CliAppTest : public ::testing::Test {
 protected:
  CliAppTest() {
    commands_.push_back({{"jobs", "get"},
                         "Show one job",
                         "",
                         {{"JOB_ID", "the job"}},
                         {{"verbose", "", "more"}},
                         [this](CommandContext& c) {
                           seen_id_ = c.args.Positional(0);
                           seen_json_ = c.json;
                           c.out << "got " << seen_id_ << "\n";
                           return absl::OkStatus();
                         }});
    commands_.push_back(
        {{"jobs", "fail"}, "Fails like a server would", "", {}, {}, [](CommandContext&) {
           return absl::NotFoundError("job job-123 not found");
         }});
    commands_.push_back({{"jobs", "bad"}, "Returns a usage error", "", {}, {}, [](CommandContext&) {
                           return UsageError("--epochs: 'x' is not an integer");
                         }});
    commands_.push_back({{"whoami"},
                         "Shows the resolved config",
                         "",
                         {},
                         {},
                         [this](CommandContext& c) -> absl::Status {
                           auto connection = c.connect();
                           if (!connection.ok()) return connection.status();
                           c.out << (*connection)->config().server << " "
                                 << (*connection)->config().token << "\n";
                           return absl::OkStatus();
                         }});
    commands_.push_back({{"soft"}, "Succeeds with exit 1", "", {}, {}, [](CommandContext& c) {
                           c.exit_code = 1;
                           return absl::OkStatus();
                         }});
  }

  Result Run(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
    CliApp app(commands_, EmptyEnvironment(std::move(env)));
    std::ostringstream out, err;
    int code = app.Run(args, out, err, false);
    return {code, out.str(), err.str()};
  }

  std::vector<Command> commands_;
  std::string seen_id_;
  bool seen_json_ = false;
};

TEST_F(CliAppTest, RunsTheMatchingCommand) {
  Result r = Run({"jobs", "get", "job-1"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_EQ(r.out, "got job-1\n");
  EXPECT_EQ(seen_id_, "job-1");
  EXPECT_FALSE(seen_json_);
}

TEST_F(CliAppTest, GlobalFlagsAnywhere) {
  Result r = Run({"--json", "jobs", "get", "job-2"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_TRUE(seen_json_);
  Result after = Run({"jobs", "get", "job-3", "--server", "h:1", "--token=t", "whatever"});
  EXPECT_EQ(after.code, kExitUsage);  // "whatever" is an extra positional
  Result w = Run({"whoami", "--server", "h:1", "--token=t", "--allow-plaintext"});
  EXPECT_EQ(w.code, kExitOk);
  EXPECT_EQ(w.out, "h:1 t\n");
  // Without TLS and without --allow-plaintext, the token does not leave this host.
  Result refused = Run({"whoami", "--server", "h:1", "--token=t"});
  EXPECT_EQ(refused.code, kExitError);
  EXPECT_EQ(refused.out, "");
  EXPECT_NE(refused.err.find("FAILED_PRECONDITION: refusing to send the API token in clear to h:1"),
            std::string::npos)
      << refused.err;
}

TEST_F(CliAppTest, EnvironmentIsUsedAndFlagsWin) {
  Result env = Run({"whoami"}, {{"GANTRY_SERVER", "e:2"},
                                {"GANTRY_TOKEN", "envtok"},
                                {"GANTRY_ALLOW_PLAINTEXT", "1"}});
  EXPECT_EQ(env.out, "e:2 envtok\n");
  Result flag = Run({"whoami", "--token", "flagtok"}, {{"GANTRY_TOKEN", "envtok"}});
  EXPECT_EQ(flag.out, std::string(kDefaultServer) + " flagtok\n");
}

TEST_F(CliAppTest, ServerErrorsPrintCodeAndMessageAndExit1) {
  Result r = Run({"jobs", "fail"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_EQ(r.err, "gantry: NOT_FOUND: job job-123 not found\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(CliAppTest, HandlerUsageErrorsExit2) {
  Result r = Run({"jobs", "bad"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("gantry: usage: --epochs: 'x' is not an integer"));
  EXPECT_THAT(r.err, HasSubstr("gantry jobs bad --help"));
}

TEST_F(CliAppTest, HandlerMayChooseExitCode) { EXPECT_EQ(Run({"soft"}).code, 1); }

TEST_F(CliAppTest, UsageErrorsExit2) {
  EXPECT_EQ(Run({}).code, kExitUsage);
  Result unknown = Run({"frobnicate"});
  EXPECT_EQ(unknown.code, kExitUsage);
  EXPECT_THAT(unknown.err, HasSubstr("unknown command 'frobnicate'"));
  Result missing = Run({"jobs", "get"});
  EXPECT_EQ(missing.code, kExitUsage);
  EXPECT_THAT(missing.err, HasSubstr("missing JOB_ID"));
  Result bad_flag = Run({"jobs", "get", "j", "--nope"});
  EXPECT_EQ(bad_flag.code, kExitUsage);
  EXPECT_THAT(bad_flag.err, HasSubstr("unknown flag --nope"));
  Result bad_timeout = Run({"jobs", "get", "j", "--timeout", "-3"});
  EXPECT_EQ(bad_timeout.code, kExitUsage);
  EXPECT_THAT(bad_timeout.err, HasSubstr("--timeout"));
  Result dangling = Run({"jobs", "get", "j", "--server"});
  EXPECT_EQ(dangling.code, kExitUsage);
  EXPECT_THAT(dangling.err, HasSubstr("--server needs a value"));
}

TEST_F(CliAppTest, GroupAloneListsSubcommands) {
  Result r = Run({"jobs"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("needs a subcommand"));
  EXPECT_THAT(r.err, HasSubstr("gantry jobs get"));
  Result typo = Run({"jobs", "gte"});
  EXPECT_EQ(typo.code, kExitUsage);
  EXPECT_THAT(typo.err, HasSubstr("unknown command 'gantry jobs gte'"));
  Result help = Run({"jobs", "--help"});
  EXPECT_EQ(help.code, kExitOk);
  EXPECT_THAT(help.out, HasSubstr("gantry jobs fail"));
}

TEST_F(CliAppTest, HelpPrintsUsage) {
  Result all = Run({"help"});
  EXPECT_EQ(all.code, kExitOk);
  EXPECT_THAT(all.out, HasSubstr("Usage: gantry <command>"));
  EXPECT_THAT(all.out, HasSubstr("jobs get"));
  EXPECT_THAT(all.out, HasSubstr("--server HOST:PORT"));
  Result dash = Run({"--help"});
  EXPECT_EQ(dash.code, kExitOk);
  EXPECT_EQ(dash.out, all.out);

  Result one = Run({"jobs", "get", "--help"});
  EXPECT_EQ(one.code, kExitOk);
  EXPECT_THAT(one.out, HasSubstr("Usage: gantry jobs get JOB_ID [flags]"));
  EXPECT_THAT(one.out, HasSubstr("--verbose"));
  EXPECT_EQ(seen_id_, "");  // the handler did not run
  Result topic = Run({"help", "jobs", "get"});
  EXPECT_EQ(topic.out, one.out);
  Result unknown = Run({"help", "nope"});
  EXPECT_EQ(unknown.code, kExitUsage);
}

TEST(CliAppRealCommandsTest, EveryRequiredCommandExistsWithHelp) {
  CliApp app(AllCommands(), EmptyEnvironment());
  const std::vector<std::vector<std::string>> required = {{"jobs", "submit"},
                                                          {"jobs", "list"},
                                                          {"jobs", "get"},
                                                          {"jobs", "cancel"},
                                                          {"jobs", "watch"},
                                                          {"jobs", "logs"},
                                                          {"datasets", "upload"},
                                                          {"datasets", "list"},
                                                          {"datasets", "get"},
                                                          {"datasets", "download"},
                                                          {"datasets", "delete"},
                                                          {"models", "list"},
                                                          {"models", "get"},
                                                          {"models", "alias", "set"},
                                                          {"models", "alias", "delete"},
                                                          {"models", "tag"},
                                                          {"models", "archive"},
                                                          {"admin", "tenants", "create"},
                                                          {"admin", "tenants", "list"},
                                                          {"admin", "tenants", "limits"},
                                                          {"admin", "tenants", "limits", "set"},
                                                          {"admin", "tokens", "create"},
                                                          {"admin", "tokens", "revoke"},
                                                          {"admin", "join-tokens", "create"},
                                                          {"admin", "join-tokens", "list"},
                                                          {"admin", "join-tokens", "revoke"},
                                                          {"admin", "workers"},
                                                          {"health"},
                                                          {"generate"}};
  for (auto args : required) {
    args.push_back("--help");
    std::ostringstream out, err;
    EXPECT_EQ(app.Run(args, out, err, false), kExitOk) << args[0] << " " << args[1];
    EXPECT_THAT(out.str(), HasSubstr("Usage: gantry " + args[0])) << err.str();
  }
  std::ostringstream out, err;
  EXPECT_EQ(app.Run({"jobs", "submit", "--epochs", "ten"}, out, err, false), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--epochs: 'ten' is not an integer"));
  std::ostringstream out2, err2;
  EXPECT_EQ(app.Run({"generate", "m:1"}, out2, err2, false), kExitUsage);
  EXPECT_THAT(err2.str(), HasSubstr("--energy"));
}

}  // namespace
}  // namespace gantry::cli
