// Tests of CliConfig resolution: flags > environment > config file > default, and file parsing.
#include "clients/cli/cli_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "absl/status/status.h"
#include "clients/cli/connection.h"

namespace gantry::cli {
namespace {

using ::testing::HasSubstr;

// An environment and file system held in maps.
struct FakeWorld {
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> files;
  std::set<std::string> shared;  // files group or others may read
  std::vector<std::string> reads;

  ConfigEnvironment Environment() {
    ConfigEnvironment e;
    e.getenv = [this](const std::string& name) -> std::optional<std::string> {
      auto it = env.find(name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
    e.read_config = [this](const std::string& path) -> absl::StatusOr<ConfigFileRead> {
      reads.push_back(path);
      auto it = files.find(path);
      if (it == files.end()) return absl::NotFoundError(path + " does not exist");
      ConfigFileRead read;
      read.contents = it->second;
      if (shared.count(path) != 0) {
        read.private_enough =
            absl::FailedPreconditionError("config file " + path + " has mode 0644: chmod 600");
      }
      return read;
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

// A token at rest is read only from a private file; a file without one may be shared.
TEST(CliConfigTest, AConfigFileHoldingATokenMustBePrivate) {
  FakeWorld world;
  world.env["HOME"] = "/h";
  world.files["/h/.config/gantry/config"] = "server = s:1\ntoken = t1\n";
  world.shared.insert("/h/.config/gantry/config");
  auto config = ResolveConfig({}, world.Environment());
  ASSERT_EQ(config.status().code(), absl::StatusCode::kFailedPrecondition) << config.status();
  EXPECT_THAT(config.status().message(), HasSubstr("chmod 600"));
  EXPECT_THAT(config.status().message(), HasSubstr("(it holds a token)"));
  // Refused even when the environment's token would win: the file's token is exposed all the same.
  world.env["GANTRY_TOKEN"] = "env-token";
  EXPECT_EQ(ResolveConfig({}, world.Environment()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  world.files["/h/.config/gantry/config"] = "server = s:1\n";
  config = ResolveConfig({}, world.Environment());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "s:1");
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

TEST(CliConfigTest, AllowPlaintextFromFileEnvAndFlag) {
  FakeWorld world;
  world.files["/c"] = "allow_plaintext = true\n";
  ConfigFlags flags;
  flags.config_path = "/c";
  absl::StatusOr<CliConfig> config = ResolveConfig(flags, world.Environment());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->allow_plaintext);
  EXPECT_EQ(config->allow_plaintext_source, "file /c");
  world.env["GANTRY_ALLOW_PLAINTEXT"] = "0";
  config = ResolveConfig(flags, world.Environment());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->allow_plaintext);
  EXPECT_EQ(config->allow_plaintext_source, "env GANTRY_ALLOW_PLAINTEXT");
  flags.allow_plaintext = true;
  config = ResolveConfig(flags, world.Environment());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->allow_plaintext);
  EXPECT_EQ(config->allow_plaintext_source, "flag");

  flags.allow_plaintext.reset();
  world.env["GANTRY_ALLOW_PLAINTEXT"] = "yes please";
  config = ResolveConfig(flags, world.Environment());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("GANTRY_ALLOW_PLAINTEXT"));
  world.env.erase("GANTRY_ALLOW_PLAINTEXT");
  world.files["/c"] = "allow_plaintext = maybe\n";
  config = ResolveConfig(flags, world.Environment());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("/c:1: allow_plaintext must be true or false"));
}

TEST(TransportTest, TokenInClearToAnotherHostIsRefused) {
  CliConfig config;
  config.server = "10.0.0.5:50051";
  config.server_source = "flag";
  config.token = "gnt_secret";
  absl::Status refused = CheckTransport(config);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(),
              HasSubstr("refusing to send the API token in clear to 10.0.0.5:50051"));
  EXPECT_THAT(refused.message(), HasSubstr("--ca-cert"));
  EXPECT_THAT(refused.message(), HasSubstr("--allow-plaintext"));
  EXPECT_THAT(refused.message(), ::testing::Not(HasSubstr("gnt_secret")));
  EXPECT_EQ(Connection::Create(config, absl::Seconds(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);

  CliConfig tls = config;
  tls.ca_cert = "/etc/ca.pem";
  EXPECT_TRUE(CheckTransport(tls).ok());
  CliConfig allowed = config;
  allowed.allow_plaintext = true;
  EXPECT_TRUE(CheckTransport(allowed).ok());
  CliConfig no_token = config;
  no_token.token.clear();
  EXPECT_TRUE(CheckTransport(no_token).ok());  // nothing secret to send (health checks)
  CliConfig loopback = config;
  loopback.server = "127.0.0.1:50051";
  EXPECT_TRUE(CheckTransport(loopback).ok());
}

}  // namespace
}  // namespace gantry::cli
