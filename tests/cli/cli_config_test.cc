// Tests of CliConfig resolution: flags > environment > config file > default, and file parsing.
#include "clients/cli/cli_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "absl/status/status.h"

namespace gantry::cli {
namespace {

using ::testing::HasSubstr;

// An environment and file system held in maps.
struct FakeWorld {
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;
  std::vector<std::string> reads;

  ConfigEnvironment Environment() {
    ConfigEnvironment e;
    e.getenv = [this](const std::string& name) -> std::optional<std::string> {
      auto it = env.find(name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
    e.read_file = [this](const std::string& path) -> absl::StatusOr<std::string> {
      reads.push_back(path);
      auto it = files.find(path);
      if (it == files.end()) return absl::NotFoundError(path + " does not exist");
      return it->second;
    };
    return e;
  }
};

TEST(CliConfigTest, DefaultsWhenNothingIsGiven) {
  FakeWorld world;
  world.env["HOME"] = "/home/u";
  auto config = ResolveConfig({}, world.Environment());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, kDefaultServer);
  EXPECT_EQ(config->server_source, "default");
  EXPECT_EQ(config->token, "");
  EXPECT_EQ(config->ca_cert, "");
  // The default file was looked for, and its absence is fine.
  EXPECT_EQ(world.reads, std::vector<std::string>{"/home/u/.config/gantry/config"});
}

TEST(CliConfigTest, FileThenEnvThenFlagsWin) {
  FakeWorld world;
  world.env["HOME"] = "/home/u";
  world.files["/home/u/.config/gantry/config"] =
      "# my cluster\nserver = file-host:1\n  token=file-token  \nca_cert = /etc/ca.pem\n";
  auto from_file = ResolveConfig({}, world.Environment());
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->server, "file-host:1");
  EXPECT_EQ(from_file->token, "file-token");
  EXPECT_EQ(from_file->ca_cert, "/etc/ca.pem");
  EXPECT_EQ(from_file->token_source, "file /home/u/.config/gantry/config");

  world.env["GANTRY_SERVER"] = "env-host:2";
  world.env["GANTRY_TOKEN"] = "env-token";
  auto from_env = ResolveConfig({}, world.Environment());
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ(from_env->server, "env-host:2");
  EXPECT_EQ(from_env->server_source, "env GANTRY_SERVER");
  EXPECT_EQ(from_env->token, "env-token");
  EXPECT_EQ(from_env->ca_cert, "/etc/ca.pem");  // not overridden: still from the file

  ConfigFlags flags;
  flags.server = "flag-host:3";
  auto from_flag = ResolveConfig(flags, world.Environment());
  ASSERT_TRUE(from_flag.ok());
  EXPECT_EQ(from_flag->server, "flag-host:3");
  EXPECT_EQ(from_flag->server_source, "flag");
  EXPECT_EQ(from_flag->token, "env-token");  // the token flag was not given

  flags.token = "flag-token";
  flags.ca_cert = "/flag/ca.pem";
  auto all_flags = ResolveConfig(flags, world.Environment());
  ASSERT_TRUE(all_flags.ok());
  EXPECT_EQ(all_flags->token, "flag-token");
  EXPECT_EQ(all_flags->ca_cert, "/flag/ca.pem");
}

TEST(CliConfigTest, EmptyEnvironmentValueDoesNotOverride) {
  FakeWorld world;
  world.env["HOME"] = "/h";
  world.env["GANTRY_TOKEN"] = "";
  world.files["/h/.config/gantry/config"] = "token = t1\n";
  auto config = ResolveConfig({}, world.Environment());
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->token, "t1");
}

TEST(CliConfigTest, ConfigPathFromEnvAndFlag) {
  FakeWorld world;
  world.env["HOME"] = "/h";
  world.env["GANTRY_CONFIG"] = "/etc/gantry.conf";
  world.files["/etc/gantry.conf"] = "server = env-file:1\n";
  world.files["/tmp/flag.conf"] = "server = 'flag-file:2'\n";
  world.files["/h/.config/gantry/config"] = "server = home:3\n";
  auto via_env = ResolveConfig({}, world.Environment());
  ASSERT_TRUE(via_env.ok());
  EXPECT_EQ(via_env->server, "env-file:1");
  ConfigFlags flags;
  flags.config_path = "/tmp/flag.conf";
  auto via_flag = ResolveConfig(flags, world.Environment());
  ASSERT_TRUE(via_flag.ok());
  EXPECT_EQ(via_flag->server, "flag-file:2");  // quotes stripped
}

TEST(CliConfigTest, ExplicitMissingFileIsAnError) {
  FakeWorld world;
  ConfigFlags flags;
  flags.config_path = "/nope.conf";
  auto config = ResolveConfig(flags, world.Environment());
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("/nope.conf"));
  world.env["GANTRY_CONFIG"] = "/also-nope";
  EXPECT_FALSE(ResolveConfig({}, world.Environment()).ok());
}

TEST(CliConfigTest, BadFileLinesNameFileAndLine) {
  auto unknown = ParseConfigFile("/c", "server = a:1\n\nprot = x\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("/c:3"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown key 'prot'"));
  auto malformed = ParseConfigFile("/c", "server a:1\n");
  ASSERT_FALSE(malformed.ok());
  EXPECT_THAT(malformed.status().message(), HasSubstr("/c:1: expected 'key = value'"));
  auto ok = ParseConfigFile("/c", "# only a comment\n\n   \ntoken = abc=def\n");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->token, "abc=def");
}

TEST(CliConfigTest, BadDefaultFileIsReported) {
  FakeWorld world;
  world.env["HOME"] = "/h";
  world.files["/h/.config/gantry/config"] = "bogus\n";
  auto config = ResolveConfig({}, world.Environment());
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("/h/.config/gantry/config:1"));
}

}  // namespace
}  // namespace gantry::cli
