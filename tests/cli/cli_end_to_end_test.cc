// End-to-end tests of the `gantry` CLI: a real gantry-server process on a fresh PostgreSQL database
// (GANTRY_TEST_DSN), driven by the real `gantry` binary run as a subprocess.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gantry/v1/admin.pb.h"
#include "gantry/v1/catalog.pb.h"
#include "gantry/v1/datasets.pb.h"
#include "gantry/v1/training.pb.h"
#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"
#include "storage/database.h"
#include "storage/job_repository.h"
#include "storage/model_repository.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_database.h"

namespace gantry::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kAdminToken[] = "cli-e2e-admin-token-0123456789abcdef";

template <typename Message>
Message ParseJson(const std::string& json) {
  Message message;
  auto status = google::protobuf::util::JsonStringToMessage(json, &message);
  EXPECT_TRUE(status.ok()) << status.message() << "\nin: " << json;
  return message;
}

// Parses a JSON array of objects by wrapping it as the repeated field `field` of `Wrapper`.
template <typename Wrapper>
Wrapper ParseJsonArray(const std::string& field, const std::string& json) {
  return ParseJson<Wrapper>("{\"" + field + "\": " + json + "}");
}

std::string FirstMatch(const std::string& text, const std::string& pattern) {
  std::smatch match;
  if (std::regex_search(text, match, std::regex(pattern))) return match.str(0);
  return "";
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class CliEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gantry::testing::WriteSecretFile(dir_.File("admin-token"), absl::StrCat(kAdminToken, "\n"));
    std::string error;
    server_ = ChildProcess::StartServer(
        {GANTRY_SERVER_BINARY, "--listen", "127.0.0.1:0", "--db", db_.dsn(), "--data-dir",
         dir_.File("data"), "--admin-token-file", dir_.File("admin-token")},
        dir_.File("server.err"), &error);
    ASSERT_NE(server_, nullptr) << error;

    // The admin creates tenant alice and a token for her, through the CLI.
    CommandResult tenant = Admin({"admin", "tenants", "create", "alice"});
    ASSERT_EQ(tenant.exit_code, 0) << tenant.err;
    EXPECT_THAT(tenant.out, HasSubstr("alice"));
    CommandResult token = Admin({"admin", "tokens", "create", "alice", "--quiet"});
    ASSERT_EQ(token.exit_code, 0) << token.err;
    alice_token_ = token.out.substr(0, token.out.find('\n'));
    ASSERT_GE(alice_token_.size(), 16u) << token.out;
  }

  void TearDown() override {
    if (HasFailure()) std::cerr << "gantry-server stderr:\n" << ReadBytes(dir_.File("server.err"));
  }

  // Runs `gantry args...` with a clean environment: no GANTRY_* variables and a HOME without a
  // config file, plus `env`.
  CommandResult Gantry(const std::vector<std::string>& args, EnvChanges env = {}) {
    std::vector<std::string> argv = {GANTRY_CLI_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    EnvChanges full = {{"GANTRY_SERVER", std::nullopt},
                       {"GANTRY_TOKEN", std::nullopt},
                       {"GANTRY_CONFIG", std::nullopt},
                       {"GANTRY_CA_CERT", std::nullopt},
                       {"HOME", dir_.path()}};
    for (auto& [name, value] : env) full[name] = value;
    return ChildProcess::Run(argv, full, dir_.path());
  }
  // As alice, server and token given as flags.
  CommandResult Alice(std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", server_->address(), "--token", alice_token_});
    return Gantry(args);
  }
  CommandResult Admin(std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", server_->address(), "--token", kAdminToken});
    return Gantry(args);
  }

  std::string SubmitToyJob(const std::string& name) {
    CommandResult submit = Alice({"jobs", "submit", "--name", name, "--preset", "tiny", "--dataset",
                                  "toymc:events=200,seed=3", "--epochs", "2", "--batch", "16",
                                  "--world-size", "1", "--label", "suite=cli"});
    EXPECT_EQ(submit.exit_code, 0) << submit.err;
    return FirstMatch(submit.out, "job-[0-9a-f-]+");
  }

  TestDatabase db_;
  TempDir dir_;
  std::unique_ptr<ChildProcess> server_;
  std::string alice_token_;
};

TEST_F(CliEndToEndTest, HealthIsServing) {
  CommandResult health = Gantry({"health", "--server", server_->address()});
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(health.out, "SERVING\n");
}

TEST_F(CliEndToEndTest, SubmitListGetCancelWatch) {
  CommandResult submit = Alice({"jobs", "submit", "--name", "ele-toy", "--preset", "tiny",
                                "--dataset", "toymc:events=200,seed=3", "--epochs", "2", "--batch",
                                "16", "--world-size", "1", "--label", "suite=cli"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = FirstMatch(submit.out, "job-[0-9a-f-]+");
  ASSERT_FALSE(id.empty()) << submit.out;
  EXPECT_THAT(submit.out, StartsWith("ID"));
  EXPECT_THAT(submit.out, HasSubstr("QUEUED"));
  EXPECT_THAT(submit.out, HasSubstr("ele-toy"));
  EXPECT_THAT(submit.out, HasSubstr("alice"));

  CommandResult list = Alice({"jobs", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr(id));
  EXPECT_THAT(list.out, HasSubstr("QUEUED"));

  CommandResult json = Alice({"jobs", "list", "--json", "--label", "suite=cli"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto jobs = ParseJsonArray<v1::ListJobsResponse>("jobs", json.out);
  ASSERT_EQ(jobs.jobs_size(), 1) << json.out;
  EXPECT_EQ(jobs.jobs(0).id(), id);
  EXPECT_EQ(jobs.jobs(0).state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(jobs.jobs(0).spec().hyper_parameters().epochs(), 2);
  EXPECT_EQ(jobs.jobs(0).spec().labels().at("suite"), "cli");
  CommandResult other_label = Alice({"--json", "jobs", "list", "--label", "suite=other"});
  EXPECT_EQ(other_label.out, "[]\n");

  CommandResult get = Alice({"jobs", "get", id, "--json"});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(ParseJson<v1::Job>(get.out).spec().display_name(), "ele-toy");

  CommandResult cancel = Alice({"jobs", "cancel", id, "--reason", "e2e test"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_THAT(cancel.out, HasSubstr("CANCELLED"));
  CommandResult after = Alice({"jobs", "get", id, "--json"});
  EXPECT_EQ(ParseJson<v1::Job>(after.out).state(), v1::JOB_STATE_CANCELLED);
  CommandResult cancelled = Alice({"jobs", "list", "--state", "cancelled"});
  EXPECT_THAT(cancelled.out, HasSubstr(id));
  CommandResult queued = Alice({"jobs", "list", "--state", "queued"});
  EXPECT_EQ(queued.out, "No jobs.\n");

  // The job has ended, so a watch replays its events and exits non-zero: it did not succeed.
  CommandResult watch = Alice({"jobs", "watch", id});
  EXPECT_EQ(watch.exit_code, 1) << watch.out << watch.err;
  EXPECT_THAT(watch.out, HasSubstr("QUEUED -> CANCELLED"));
  EXPECT_THAT(watch.err, HasSubstr("ended CANCELLED"));

  CommandResult logs = Alice({"jobs", "logs", id});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
}

TEST_F(CliEndToEndTest, WatchFollowsALiveJobUntilItEnds) {
  const std::string id = SubmitToyJob("live-watch");
  ASSERT_FALSE(id.empty());
  CommandResult watch;
  std::thread watcher([&] { watch = Alice({"jobs", "watch", id}); });
  // Give the watch time to replay the history and wait for news, then end the job.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CommandResult cancel = Alice({"jobs", "cancel", id, "--reason", "seen live"});
  watcher.join();
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(watch.exit_code, 1) << watch.out << watch.err;
  EXPECT_THAT(watch.out, HasSubstr("(new) -> QUEUED (Submitted"));
  EXPECT_THAT(watch.out,
              HasSubstr("QUEUED -> CANCELLED (CancelledByUser: cancelled by alice: seen live)"));
  EXPECT_THAT(watch.err, HasSubstr("ended CANCELLED"));

  // --json: one JobEvent per line; --after skips what was seen.
  CommandResult json = Alice({"--json", "jobs", "watch", id, "--after", "1"});
  EXPECT_EQ(json.exit_code, 1);
  std::istringstream lines(json.out);
  std::string line;
  std::vector<v1::JobEvent> events;
  while (std::getline(lines, line)) events.push_back(ParseJson<v1::JobEvent>(line));
  ASSERT_EQ(events.size(), 1u) << json.out;
  EXPECT_EQ(events[0].sequence(), 2);
  EXPECT_EQ(events[0].state_change().to(), v1::JOB_STATE_CANCELLED);
}

TEST_F(CliEndToEndTest, SpecFileAndFlagsOverride) {
  std::ofstream(dir_.File("job.json"))
      << R"({"displayName": "from-file", "modelPreset": "tiny", "dataset": "toymc:events=100",
             "hyperParameters": {"epochs": 3, "batchPerRank": 8}, "worldSize": 1})";
  CommandResult submit =
      Alice({"--json", "jobs", "submit", "--spec", dir_.File("job.json"), "--epochs", "5"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  v1::Job job = ParseJson<v1::Job>(submit.out);
  EXPECT_EQ(job.spec().display_name(), "from-file");
  EXPECT_EQ(job.spec().hyper_parameters().epochs(), 5);
  EXPECT_EQ(job.spec().hyper_parameters().batch_per_rank(), 8);
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
}

TEST_F(CliEndToEndTest, ErrorsExitNonZeroWithCodeAndMessage) {
  CommandResult missing = Alice({"jobs", "get", "job-00000000-0000-0000-0000-000000000000"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, StartsWith("gantry: NOT_FOUND: "));
  EXPECT_EQ(missing.out, "");
  // The CLI prints the request id it sent; the server logged the failed call under it.
  const std::smatch id = [&] {
    std::smatch m;
    std::regex_search(missing.err, m, std::regex("\ngantry: request id (cli-[0-9a-f]{16})\n"));
    return m;
  }();
  ASSERT_EQ(id.size(), 2u) << missing.err;
  EXPECT_THAT(ReadBytes(dir_.File("server.err")),
              AllOf(HasSubstr("request_id=" + id[1].str()), HasSubstr("code=NOT_FOUND")));

  CommandResult bad_epochs =
      Alice({"jobs", "submit", "--preset", "tiny", "--dataset", "toymc:events=100", "--epochs", "0",
             "--batch", "8", "--world-size", "1"});
  EXPECT_EQ(bad_epochs.exit_code, 1);
  EXPECT_THAT(bad_epochs.err, StartsWith("gantry: INVALID_ARGUMENT: "));
  EXPECT_THAT(bad_epochs.err, HasSubstr("epochs"));
  // The server's google.rpc.BadRequest details, one line per field.
  EXPECT_THAT(bad_epochs.err, HasSubstr("\n  field spec.hyper_parameters.epochs: "));

  CommandResult usage = Alice({"jobs", "submit", "--epochs", "ten"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.err, HasSubstr("--epochs: 'ten' is not an integer"));

  CommandResult bad_token =
      Gantry({"jobs", "list", "--server", server_->address(), "--token", "not-a-real-token-xx"});
  EXPECT_EQ(bad_token.exit_code, 1);
  EXPECT_THAT(bad_token.err, StartsWith("gantry: UNAUTHENTICATED: "));

  CommandResult no_token = Gantry({"jobs", "list", "--server", server_->address()});
  EXPECT_EQ(no_token.exit_code, 1);
  EXPECT_THAT(no_token.err, StartsWith("gantry: UNAUTHENTICATED: "));

  CommandResult not_admin = Alice({"admin", "tenants", "list"});
  EXPECT_EQ(not_admin.exit_code, 1);
  EXPECT_THAT(not_admin.err, StartsWith("gantry: PERMISSION_DENIED: "));

  CommandResult duplicate = Admin({"admin", "tenants", "create", "alice"});
  EXPECT_EQ(duplicate.exit_code, 1);
  EXPECT_THAT(duplicate.err, StartsWith("gantry: ALREADY_EXISTS: "));

  CommandResult unknown_model = Alice({"generate", "nope:1", "--energy", "100"});
  EXPECT_EQ(unknown_model.exit_code, 1);
  EXPECT_THAT(unknown_model.err, StartsWith("gantry: NOT_FOUND: "));

  // Nothing listens on port 1.
  CommandResult down = Gantry({"jobs", "list", "--server", "127.0.0.1:1", "--timeout", "5"});
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_THAT(down.err, StartsWith("gantry: UNAVAILABLE: "));
}

TEST_F(CliEndToEndTest, AdminSetsAndShowsTenantLimits) {
  CommandResult set =
      Admin({"admin", "tenants", "limits", "set", "alice", "--max-concurrent-jobs", "1"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_THAT(set.out, HasSubstr("max_concurrent_jobs"));
  CommandResult json = Admin({"admin", "tenants", "limits", "alice", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto info = ParseJson<v1::TenantLimitsInfo>(json.out);
  EXPECT_EQ(info.effective().max_concurrent_jobs(), 1);
  EXPECT_TRUE(info.overrides().has_max_concurrent_jobs());
  EXPECT_FALSE(info.overrides().has_max_dataset_bytes());

  ASSERT_FALSE(SubmitToyJob("within-the-limit").empty());
  CommandResult over =
      Alice({"jobs", "submit", "--name", "over", "--preset", "tiny", "--dataset",
             "toymc:events=200,seed=3", "--epochs", "2", "--batch", "16", "--world-size", "1"});
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_THAT(over.err, StartsWith("gantry: RESOURCE_EXHAUSTED: "));
  EXPECT_THAT(over.err, HasSubstr("max_concurrent_jobs"));

  // "default" drops the override; a negative number is a usage error.
  CommandResult reset =
      Admin({"admin", "tenants", "limits", "set", "alice", "--max-concurrent-jobs", "default"});
  ASSERT_EQ(reset.exit_code, 0) << reset.err;
  json = Admin({"admin", "tenants", "limits", "alice", "--json"});
  info = ParseJson<v1::TenantLimitsInfo>(json.out);
  EXPECT_FALSE(info.overrides().has_max_concurrent_jobs());
  CommandResult negative =
      Admin({"admin", "tenants", "limits", "set", "alice", "--max-dataset-bytes", "-3"});
  EXPECT_EQ(negative.exit_code, 2) << negative.err;
  CommandResult nothing = Admin({"admin", "tenants", "limits", "set", "alice"});
  EXPECT_EQ(nothing.exit_code, 2) << nothing.err;
  CommandResult not_admin = Alice({"admin", "tenants", "limits", "alice"});
  EXPECT_THAT(not_admin.err, StartsWith("gantry: PERMISSION_DENIED: "));
}

TEST_F(CliEndToEndTest, AdminSetsFairShareWeightAndPoolQuotas) {
  CommandResult pool = Admin({"admin", "pools", "create", "hpc", "--static", "--price", "0.3"});
  ASSERT_EQ(pool.exit_code, 0) << pool.err;
  CommandResult set = Admin({"admin", "tenants", "limits", "set", "alice", "--fair-share-weight",
                             "2.5", "--max-slots-per-pool", "hpc=8"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_THAT(set.out, HasSubstr("fair_share_weight"));
  EXPECT_THAT(set.out, HasSubstr("max_slots_per_pool[hpc]"));
  CommandResult json = Admin({"admin", "tenants", "limits", "alice", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto info = ParseJson<v1::TenantLimitsInfo>(json.out);
  EXPECT_EQ(info.effective().fair_share_weight(), 2.5);
  EXPECT_EQ(info.effective().max_slots_per_pool().at("hpc"), 8);

  CommandResult unknown =
      Admin({"admin", "tenants", "limits", "set", "alice", "--max-slots-per-pool", "hbc=8"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, StartsWith("gantry: INVALID_ARGUMENT: "));
  EXPECT_THAT(unknown.err, HasSubstr("no pool is named \"hbc\"; defined pools: hpc"));
  for (const char* bad : {"hpc", "hpc=-1", "=3", "hpc=x"}) {
    CommandResult usage =
        Admin({"admin", "tenants", "limits", "set", "alice", "--max-slots-per-pool", bad});
    EXPECT_EQ(usage.exit_code, 2) << bad << ": " << usage.err;
    EXPECT_THAT(usage.err, HasSubstr("POOL=SLOTS")) << bad;
  }
  for (const char* bad : {"0", "-2", "nan", "2e6"}) {
    CommandResult usage =
        Admin({"admin", "tenants", "limits", "set", "alice", "--fair-share-weight", bad});
    EXPECT_EQ(usage.exit_code, 2) << bad << ": " << usage.err;
  }
  // "default" drops both.
  CommandResult reset = Admin({"admin", "tenants", "limits", "set", "alice", "--fair-share-weight",
                               "default", "--max-slots-per-pool", "default"});
  ASSERT_EQ(reset.exit_code, 0) << reset.err;
  info =
      ParseJson<v1::TenantLimitsInfo>(Admin({"admin", "tenants", "limits", "alice", "--json"}).out);
  EXPECT_FALSE(info.overrides().has_fair_share_weight());
  EXPECT_TRUE(info.overrides().max_slots_per_pool().empty());
  EXPECT_EQ(info.effective().fair_share_weight(), 1);
}

TEST_F(CliEndToEndTest, EnvironmentAndConfigFileAreHonoured) {
  const std::string id = SubmitToyJob("env-job");
  ASSERT_FALSE(id.empty());
  // GANTRY_SERVER and GANTRY_TOKEN alone.
  CommandResult env = Gantry(
      {"jobs", "list"}, {{"GANTRY_SERVER", server_->address()}, {"GANTRY_TOKEN", alice_token_}});
  ASSERT_EQ(env.exit_code, 0) << env.err;
  EXPECT_THAT(env.out, HasSubstr(id));
  // A flag beats a wrong token in the environment...
  CommandResult flag_wins =
      Gantry({"jobs", "list", "--token", alice_token_},
             {{"GANTRY_SERVER", server_->address()}, {"GANTRY_TOKEN", "wrong-token-wrong-token"}});
  EXPECT_EQ(flag_wins.exit_code, 0) << flag_wins.err;
  // ...and the environment beats the config file.
  gantry::testing::WriteSecretFile(
      dir_.File("gantry.conf"),
      absl::StrCat("# test\nserver = ", server_->address(), "\ntoken = wrong-token-from-file\n"));
  CommandResult env_wins = Gantry({"jobs", "list"}, {{"GANTRY_CONFIG", dir_.File("gantry.conf")},
                                                     {"GANTRY_TOKEN", alice_token_}});
  EXPECT_EQ(env_wins.exit_code, 0) << env_wins.err;
  CommandResult file_only = Gantry({"jobs", "list"}, {{"GANTRY_CONFIG", dir_.File("gantry.conf")}});
  EXPECT_EQ(file_only.exit_code, 1);
  EXPECT_THAT(file_only.err, StartsWith("gantry: UNAUTHENTICATED: "));
  // The default config file under $HOME.
  std::filesystem::create_directories(dir_.File(".config/gantry"));
  const std::string home_config = dir_.File(".config/gantry/config");
  gantry::testing::WriteSecretFile(
      home_config, absl::StrCat("server = ", server_->address(), "\ntoken = ", alice_token_, "\n"));
  CommandResult home = Gantry({"jobs", "list"});
  EXPECT_EQ(home.exit_code, 0) << home.err;
  EXPECT_THAT(home.out, HasSubstr(id));
  // The same file readable by others is refused: a token at rest stays private.
  ASSERT_EQ(::chmod(home_config.c_str(), 0644), 0);
  CommandResult shared = Gantry({"jobs", "list"});
  EXPECT_EQ(shared.exit_code, 1) << shared.err;
  EXPECT_THAT(shared.err, HasSubstr("has mode 0644"));
  EXPECT_THAT(shared.err, HasSubstr("chmod 600"));
}

TEST_F(CliEndToEndTest, AdminCommands) {
  CommandResult tenants = Admin({"admin", "tenants", "list", "--json"});
  ASSERT_EQ(tenants.exit_code, 0) << tenants.err;
  auto list = ParseJsonArray<v1::ListTenantsResponse>("tenants", tenants.out);
  std::vector<std::string> names;
  for (const auto& t : list.tenants()) names.push_back(t.name());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("admin", "alice"));

  CommandResult created =
      Admin({"--json", "admin", "tokens", "create", "alice", "--description", "second"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  auto token = ParseJson<v1::CreateTokenResponse>(created.out);
  ASSERT_FALSE(token.token().empty());
  CommandResult works =
      Gantry({"jobs", "list", "--server", server_->address()}, {{"GANTRY_TOKEN", token.token()}});
  EXPECT_EQ(works.exit_code, 0) << works.err;
  CommandResult revoke = Admin({"admin", "tokens", "revoke", token.token_id()});
  ASSERT_EQ(revoke.exit_code, 0) << revoke.err;
  CommandResult revoked =
      Gantry({"jobs", "list", "--server", server_->address()}, {{"GANTRY_TOKEN", token.token()}});
  EXPECT_EQ(revoked.exit_code, 1);
  EXPECT_THAT(revoked.err, StartsWith("gantry: UNAUTHENTICATED: "));

  CommandResult join = Admin({"admin", "join-tokens", "create", "--quiet"});
  EXPECT_EQ(join.exit_code, 0) << join.err;
  EXPECT_GE(join.out.size(), 16u);
  CommandResult second =
      Admin({"--json", "admin", "join-tokens", "create", "--description", "rack 9"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const auto join_token = ParseJson<v1::CreateTokenResponse>(second.out);
  CommandResult joins = Admin({"admin", "join-tokens", "list"});
  ASSERT_EQ(joins.exit_code, 0) << joins.err;
  EXPECT_THAT(joins.out, HasSubstr(join_token.token_id()));
  EXPECT_THAT(joins.out, HasSubstr("rack 9"));
  EXPECT_EQ(joins.out.find(join_token.token()), std::string::npos) << "never the secret";
  CommandResult join_revoke = Admin({"admin", "join-tokens", "revoke", join_token.token_id()});
  ASSERT_EQ(join_revoke.exit_code, 0) << join_revoke.err;
  EXPECT_THAT(join_revoke.out, HasSubstr("revoked " + join_token.token_id()));
  CommandResult joins_json = Admin({"--json", "admin", "join-tokens", "list"});
  ASSERT_EQ(joins_json.exit_code, 0) << joins_json.err;
  auto listed = ParseJsonArray<v1::ListJoinTokensResponse>("tokens", joins_json.out);
  ASSERT_EQ(listed.tokens_size(), 2);
  EXPECT_FALSE(listed.tokens(0).has_revoked_at());
  EXPECT_TRUE(listed.tokens(1).has_revoked_at());
  CommandResult unknown = Admin({"admin", "join-tokens", "revoke", "jtk-nope"});
  EXPECT_NE(unknown.exit_code, 0);
  CommandResult workers = Admin({"admin", "workers"});
  EXPECT_EQ(workers.exit_code, 0) << workers.err;
  EXPECT_EQ(workers.out, "No workers.\n");
}

TEST_F(CliEndToEndTest, DatasetRoundTrip) {
  showers::ToyMcConfig config;
  config.events = 40;
  config.energy_min_gev = 10;
  config.energy_max_gev = 100;
  auto showers = showers::SimulateToyMc(config);
  ASSERT_TRUE(showers.ok()) << showers.status();
  const std::string file = dir_.File("Ele_toy.h5");
  ASSERT_TRUE(showers::WriteShowerFile(file, *showers).ok());

  CommandResult upload = Alice({"datasets", "upload", file, "--name", "ele-toy"});
  ASSERT_EQ(upload.exit_code, 0) << upload.err;
  EXPECT_THAT(upload.out, HasSubstr("3dgan-fixed-angle"));
  EXPECT_THAT(upload.out, HasSubstr("electron"));
  const std::string id = FirstMatch(upload.out, "ds-[0-9a-f-]+");
  ASSERT_FALSE(id.empty()) << upload.out;

  CommandResult list = Alice({"datasets", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  auto datasets = ParseJsonArray<v1::ListDatasetsResponse>("datasets", list.out);
  ASSERT_EQ(datasets.datasets_size(), 1);
  EXPECT_EQ(datasets.datasets(0).events(), 40);
  EXPECT_EQ(datasets.datasets(0).size_bytes(), static_cast<int64_t>(ReadBytes(file).size()));

  CommandResult get = Alice({"datasets", "get", "ele-toy"});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_THAT(get.out, HasSubstr(id));
  EXPECT_THAT(get.out, HasSubstr("[25,25,25]"));

  CommandResult download = Alice({"datasets", "download", id, "--output", dir_.File("copy.h5")});
  ASSERT_EQ(download.exit_code, 0) << download.err;
  EXPECT_EQ(ReadBytes(dir_.File("copy.h5")), ReadBytes(file));

  CommandResult again = Alice({"datasets", "upload", file, "--name", "ele-toy"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, StartsWith("gantry: ALREADY_EXISTS: "));

  // A queued job that uses the dataset keeps it from being deleted.
  // (named by its name: the CLI resolves it to the ds- id the API takes).
  CommandResult submit = Alice({"--json", "jobs", "submit", "--preset", "3dgan-25", "--dataset",
                                "ele-toy", "--epochs", "1", "--batch", "8", "--world-size", "1"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string job = ParseJson<v1::Job>(submit.out).id();
  EXPECT_EQ(ParseJson<v1::Job>(submit.out).spec().dataset(), id);
  CommandResult unknown = Alice({"jobs", "submit", "--preset", "3dgan-25", "--dataset", "nope",
                                 "--epochs", "1", "--batch", "8", "--world-size", "1"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, StartsWith("gantry: NOT_FOUND: --dataset nope: "));
  CommandResult refused = Alice({"datasets", "delete", id});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, StartsWith("gantry: FAILED_PRECONDITION: "));
  ASSERT_EQ(Alice({"jobs", "cancel", job}).exit_code, 0);
  CommandResult deleted = Alice({"datasets", "delete", id});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  CommandResult gone = Alice({"datasets", "get", id});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, StartsWith("gantry: NOT_FOUND: "));
}

TEST_F(CliEndToEndTest, ModelsAndGeneration) {
  CommandResult empty = Alice({"models", "list"});
  ASSERT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_EQ(empty.out, "No models.\n");
  EXPECT_EQ(Alice({"models", "list", "--json"}).out, "[]\n");

  // No workers here: register a version in storage, the way a finished job does.
  auto database = storage::Database::Create(db_.dsn(), 1);
  ASSERT_TRUE(database.ok()) << database.status();
  storage::ModelRepository models(**database);
  v1::ModelVersion model;
  model.set_owner("alice");
  model.set_name("ele");
  model.set_particle(v1::PARTICLE_ELECTRON);
  model.mutable_energy_range_gev()->set_min(10);
  model.mutable_energy_range_gev()->set_max(500);
  model.mutable_lineage()->set_model_preset("3dgan-25");
  model.mutable_lineage()->set_checkpoint_step(0);  // register_best chose the untrained start
  model.mutable_lineage()->set_checkpoint_epoch(0);
  (*model.mutable_metrics())["fom"] = 0.0421;
  v1::Histogram* profile = model.add_histograms();
  profile->set_name("longitudinal_profile");
  profile->set_x_label("layer");
  for (double r : {1.0, 3.0}) profile->add_reference(r);
  for (double g : {1.5, 3.0}) profile->add_generated(g);
  ASSERT_TRUE(models.Register(model).ok());

  CommandResult list = Alice({"models", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("ele:1"));
  EXPECT_THAT(list.out, HasSubstr("0.0421"));

  CommandResult alias = Alice({"models", "alias", "set", "ele", "champion", "1"});
  ASSERT_EQ(alias.exit_code, 0) << alias.err;
  CommandResult get = Alice({"--json", "models", "get", "ele@champion"});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  auto got = ParseJson<v1::ModelVersion>(get.out);
  EXPECT_EQ(got.version(), 1);
  EXPECT_THAT(got.aliases(), ::testing::ElementsAre("champion"));
  EXPECT_TRUE(got.lineage().has_checkpoint_step()) << "step 0 is recorded, not left out";
  CommandResult plain = Alice({"models", "get", "ele:1"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("(epoch 0, step 0)"));

  CommandResult histogram =
      Alice({"models", "get", "ele:1", "--histogram", "longitudinal_profile"});
  ASSERT_EQ(histogram.exit_code, 0) << histogram.err;
  EXPECT_THAT(
      histogram.out,
      HasSubstr("layer  REFERENCE  GENERATED  RATIO\n0      1          1.5        1.500\n"));
  CommandResult no_histogram = Alice({"models", "get", "ele:1", "--histogram", "nope"});
  EXPECT_EQ(no_histogram.exit_code, 1);
  EXPECT_THAT(no_histogram.err,
              HasSubstr("has no histogram \"nope\" (it has: longitudinal_profile)"));

  CommandResult tag = Alice({"models", "tag", "ele:1", "stage=prod"});
  ASSERT_EQ(tag.exit_code, 0) << tag.err;
  EXPECT_THAT(tag.out, HasSubstr("stage=prod"));
  CommandResult tagged = Alice({"models", "list", "--tag", "stage=prod"});
  EXPECT_THAT(tagged.out, HasSubstr("ele:1"));

  // A valid request for a registered model, but no gantry-worker daemon serves generation here
  // (tests/cli/cli_generate_e2e_test.cc runs one).
  CommandResult generate =
      Alice({"generate", "ele@champion", "--energy", "100", "--energy", "200"});
  EXPECT_EQ(generate.exit_code, 1);
  EXPECT_THAT(generate.err, StartsWith("gantry: UNAVAILABLE: "));
  EXPECT_THAT(generate.err, HasSubstr("no worker serves generation"));
  CommandResult outside = Alice({"generate", "ele:1", "--energy", "900"});
  EXPECT_EQ(outside.exit_code, 1);
  EXPECT_THAT(outside.err, ::testing::Not(HasSubstr("UNIMPLEMENTED"))) << outside.err;

  CommandResult unalias = Alice({"models", "alias", "delete", "ele", "champion"});
  EXPECT_EQ(unalias.exit_code, 0) << unalias.err;
  CommandResult archive = Alice({"models", "archive", "ele:1"});
  ASSERT_EQ(archive.exit_code, 0) << archive.err;
  EXPECT_THAT(archive.out, HasSubstr("archived"));
  EXPECT_EQ(Alice({"models", "list"}).out, "No models.\n");
  EXPECT_THAT(Alice({"models", "list", "--include-archived"}).out, HasSubstr("ele:1"));
}

TEST_F(CliEndToEndTest, ModelsUpdateAndListFilters) {
  auto database = storage::Database::Create(db_.dsn(), 1);
  ASSERT_TRUE(database.ok()) << database.status();
  storage::ModelRepository models(**database);
  for (const auto& [name, preset, particle] :
       std::vector<std::tuple<std::string, std::string, v1::Particle>>{
           {"ele", "3dgan-25", v1::PARTICLE_ELECTRON}, {"gam", "tiny", v1::PARTICLE_PHOTON}}) {
    v1::ModelVersion model;
    model.set_owner("alice");
    model.set_name(name);
    model.set_description("first words");
    model.set_particle(particle);
    model.mutable_lineage()->set_model_preset(preset);
    model.mutable_lineage()->set_dataset("toymc:events=200,seed=" + name);
    (*model.mutable_tags())["stage"] = "draft";
    ASSERT_TRUE(models.Register(model).ok());
  }

  // The mask holds the fields whose flags are given.
  CommandResult update = Alice({"models", "update", "ele:1", "--description", "electrons, final",
                                "--visibility", "public", "--tags", "stage=prod,reviewed"});
  ASSERT_EQ(update.exit_code, 0) << update.err;
  EXPECT_THAT(update.out, HasSubstr("ele:1 updated (description, visibility, tags)"));
  EXPECT_THAT(update.out, HasSubstr("visibility:  public"));
  CommandResult only = Alice({"--json", "models", "update", "gam:1", "--visibility", "public"});
  ASSERT_EQ(only.exit_code, 0) << only.err;
  auto gam = ParseJson<v1::ModelVersion>(only.out);
  EXPECT_EQ(gam.visibility(), v1::VISIBILITY_PUBLIC);
  EXPECT_EQ(gam.description(), "first words");
  EXPECT_EQ(gam.tags().at("stage"), "draft");
  auto ele = ParseJson<v1::ModelVersion>(Alice({"--json", "models", "get", "ele:1"}).out);
  EXPECT_EQ(ele.description(), "electrons, final");
  EXPECT_EQ(ele.tags().size(), 2u);
  EXPECT_EQ(ele.tags().at("stage"), "prod");
  EXPECT_EQ(ele.tags().at("reviewed"), "");

  CommandResult none = Alice({"models", "update", "ele:1"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("give at least one of --description, --visibility, --tags"));
  CommandResult bad_visibility = Alice({"models", "update", "ele:1", "--visibility", "secret"});
  EXPECT_EQ(bad_visibility.exit_code, 2);
  EXPECT_THAT(bad_visibility.err, HasSubstr("--visibility"));
  CommandResult too_long =
      Alice({"models", "update", "ele:1", "--description", std::string(1100, 'x')});
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_THAT(too_long.err, StartsWith("gantry: INVALID_ARGUMENT: model_version.description: "));
  EXPECT_THAT(too_long.err, HasSubstr("\n  field model_version.description: "));

  // Filters, alone and combined.
  const auto listed = [&](const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"--json", "models", "list"};
    args.insert(args.end(), flags.begin(), flags.end());
    CommandResult result = Alice(args);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    const auto response = ParseJsonArray<v1::ListModelsResponse>("models", result.out);
    std::vector<std::string> names;
    for (const auto& m : response.models()) names.push_back(m.name());
    return names;
  };
  EXPECT_EQ(listed({"--particle", "photon"}), std::vector<std::string>{"gam"});
  EXPECT_EQ(listed({"--preset", "3dgan-25"}), std::vector<std::string>{"ele"});
  EXPECT_EQ(listed({"--dataset", "toymc:events=200,seed=gam"}), std::vector<std::string>{"gam"});
  EXPECT_EQ(listed({"--preset", "3dgan-25", "--particle", "photon"}), std::vector<std::string>{});
  EXPECT_EQ(listed({"--particle", "electron", "--tag", "stage=prod"}),
            std::vector<std::string>{"ele"});
  CommandResult table = Alice({"models", "list", "--particle", "electron"});
  EXPECT_THAT(table.out, HasSubstr("ele:1"));
  EXPECT_THAT(table.out, ::testing::Not(HasSubstr("gam:1")));
  CommandResult bad_particle = Alice({"models", "list", "--particle", "muon"});
  EXPECT_EQ(bad_particle.exit_code, 2);
  EXPECT_THAT(bad_particle.err, HasSubstr("--particle: unknown particle 'muon'"));
  CommandResult bad_dataset = Alice({"models", "list", "--dataset", "no such"});
  EXPECT_EQ(bad_dataset.exit_code, 1);
  EXPECT_THAT(bad_dataset.err, StartsWith("gantry: INVALID_ARGUMENT: dataset: "));
}

// A validation histogram as a finished job stores it (storage is used only to prepare the state).
v1::Histogram* AddHistogram(v1::ModelVersion* model, const std::string& name,
                            const std::string& energy_bin, int bins) {
  v1::Histogram* h = model->add_histograms();
  h->set_name(name);
  h->set_x_label("z slice");
  h->set_energy_bin(energy_bin);
  for (int i = 0; i <= bins; ++i) h->add_edges(i);
  for (int i = 0; i < bins; ++i) {
    const double mc = 1.0 / (1 + i * i);
    h->add_reference(mc);
    h->add_generated(mc * 1.1);
    h->add_reference_error(0.01 * mc);
    h->add_generated_error(0.02 * mc);
  }
  return h;
}

// Text another tenant wrote (a public model's description and tags) cannot drive alice's terminal:
// tables and listings show its control characters escaped; --json keeps the text exact.
TEST_F(CliEndToEndTest, HostileDescriptionIsPrintedEscaped) {
  auto database = storage::Database::Create(db_.dsn(), 1);
  ASSERT_TRUE(database.ok()) << database.status();
  storage::ModelRepository models(**database);
  const std::string hostile =
      "nice model\x1b]0;owned\x07\x1b[2J\rfake\nOwner:        admin\xc2\x9b"
      "8m \xc3\xa9t\xc3\xa9";
  v1::ModelVersion model;
  model.set_owner("alice");
  model.set_name("evil");
  model.set_description(hostile);
  model.set_particle(v1::PARTICLE_ELECTRON);
  model.mutable_lineage()->set_model_preset("tiny");
  model.mutable_lineage()->set_dataset("toymc:events=200,seed=1");
  (*model.mutable_tags())["t\x1b[8m"] = "hidden\x1b[0m";
  ASSERT_TRUE(models.Register(model).ok());

  const std::string escaped =
      "nice model\\x1b]0;owned\\x07\\x1b[2J\\rfake\\nOwner:        admin\\u009b8m "
      "\xc3\xa9t\xc3\xa9";
  const auto has_no_controls = [](const std::string& text) {
    for (unsigned char c : text) {
      if ((c < 0x20 && c != '\n') || c == 0x7f) return false;
    }
    return text.find("\xc2\x9b") == std::string::npos;
  };
  CommandResult get = Alice({"models", "get", "evil:1"});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_THAT(get.out, HasSubstr("Description:   " + escaped + "\n"));
  EXPECT_THAT(get.out, HasSubstr("t\\x1b[8m=hidden\\x1b[0m"));
  EXPECT_TRUE(has_no_controls(get.out)) << get.out;
  CommandResult list = Alice({"models", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("evil"));
  EXPECT_TRUE(has_no_controls(list.out)) << list.out;

  auto exact = ParseJson<v1::ModelVersion>(Alice({"--json", "models", "get", "evil:1"}).out);
  EXPECT_EQ(exact.description(), hostile);
}

TEST_F(CliEndToEndTest, ModelsPlotsWritesFiguresFromTheStoredHistograms) {
  auto database = storage::Database::Create(db_.dsn(), 1);
  ASSERT_TRUE(database.ok()) << database.status();
  storage::ModelRepository models(**database);
  v1::ModelVersion model;
  model.set_owner("alice");
  model.set_name("ele");
  model.set_particle(v1::PARTICLE_ELECTRON);
  model.mutable_lineage()->set_model_preset("tiny");
  for (const char* bin : {"10-100 GeV", "100-200 GeV"}) {
    for (const char* name :
         {"profile_x", "profile_y", "profile_z", "feature/total_energy", "feature/hits"}) {
      AddHistogram(&model, name, bin, 12);
    }
  }
  v1::Histogram* curve = model.add_histograms();
  curve->set_name("sampling_fraction_vs_energy");
  curve->set_x_label("E_primary [GeV]");
  for (double x : {55.0, 150.0}) curve->add_x(x);
  for (double v : {0.021, 0.0205}) curve->add_reference(v);
  for (double v : {0.016, 0.019}) curve->add_generated(v);
  // Hostile and broken entries: a path as a name (not a known kind: ignored) and a NaN profile.
  AddHistogram(&model, "../../escape", "10-100 GeV", 3);
  AddHistogram(&model, "profile_z", "../../200-300 GeV", 4)->set_reference(1, std::nan(""));
  // The job that trained it validated three checkpoints (the server sends that curve with the
  // version); the curve is not stored with the version itself.
  storage::JobRepository jobs(**database);
  v1::JobSpec spec;
  spec.set_model_preset("tiny");
  spec.set_dataset("toymc:events=100");
  spec.set_world_size(1);
  spec.mutable_hyper_parameters()->set_epochs(3);
  auto job = jobs.Create("alice", spec, "");
  ASSERT_TRUE(job.ok()) << job.status();
  for (int epoch = 1; epoch <= 3; ++epoch) {
    v1::ValidationPoint point;
    point.set_epoch(epoch);
    point.set_step(40 * epoch);
    auto& metrics = *point.mutable_metrics();
    metrics["mre_sampling_fraction"] = 0.3 / epoch;
    metrics["mre_sampling_fraction_null"] = 0.01;
    metrics["eprof_longitudinal"] = 0.2 / epoch;
    metrics["eprof_longitudinal_null"] = 0.02;
    metrics["fom"] = 0.5 / epoch;
    ASSERT_TRUE(jobs.RecordValidationPoint(job->id(), 0, point).ok());
  }
  model.mutable_lineage()->set_job_id(job->id());
  ASSERT_TRUE(models.Register(model).ok());

  const std::string out = dir_.File("plots");
  CommandResult plots = Alice({"models", "plots", "ele:1", "--out", out});
  ASSERT_EQ(plots.exit_code, 0) << plots.err;
  EXPECT_THAT(plots.out, HasSubstr("ele:1: 12 plots in " + out));
  EXPECT_THAT(plots.err, HasSubstr("gantry: warning: histogram #"));
  EXPECT_THAT(plots.err, HasSubstr("\"profile_z\" [../../200-300 GeV]: a value is NaN"));
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ::testing::ElementsAre(
                         "energy_sum_bin01.png", "energy_sum_bin02.png", "hit_count_bin01.png",
                         "hit_count_bin02.png", "index.md", "longitudinal_profile_bin01.png",
                         "longitudinal_profile_bin02.png", "sampling_fraction_vs_energy.png",
                         "transverse_profile_x_bin01.png", "transverse_profile_x_bin02.png",
                         "transverse_profile_y_bin01.png", "transverse_profile_y_bin02.png",
                         "validation_curve.png"));
  EXPECT_FALSE(std::filesystem::exists(dir_.File("escape.png")));
  const std::string curve_png = ReadBytes(out + "/validation_curve.png");
  EXPECT_EQ(curve_png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(curve_png.size(), 5000u);
  const std::string png = ReadBytes(out + "/longitudinal_profile_bin02.png");
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(png.size(), 5000u);
  const std::string index = ReadBytes(out + "/index.md");
  EXPECT_THAT(index, HasSubstr("| [longitudinal_profile_bin02.png](longitudinal_profile_bin02.png) "
                               "| longitudinal profile | 100-200 GeV |"));
  EXPECT_THAT(index,
              HasSubstr("| [validation_curve.png](validation_curve.png) | validation metrics "
                        "against training step | - |"));
  EXPECT_THAT(index, HasSubstr("Not plotted:"));

  // A non-empty folder is refused (nothing changed) unless --force; --force replaces the plots.
  std::ofstream(out + "/notes.txt") << "mine\n";
  CommandResult again = Alice({"models", "plots", "ele:1", "--out", out});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("FAILED_PRECONDITION: --out " + out +
                                   ": the folder is not empty; choose a new or empty folder, or "
                                   "give --force"));
  std::filesystem::remove(out + "/hit_count_bin01.png");
  CommandResult forced = Alice({"models", "plots", "ele:1", "--out", out, "--force"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(ReadBytes(out + "/longitudinal_profile_bin02.png"), png);  // deterministic
  EXPECT_EQ(ReadBytes(out + "/validation_curve.png"), curve_png);
  EXPECT_TRUE(std::filesystem::exists(out + "/hit_count_bin01.png"));
  EXPECT_EQ(ReadBytes(out + "/notes.txt"), "mine\n");

  CommandResult svg =
      Alice({"models", "plots", "ele:1", "--out", dir_.File("svg/nested"), "--format", "svg"});
  ASSERT_EQ(svg.exit_code, 0) << svg.err;
  EXPECT_THAT(ReadBytes(dir_.File("svg/nested/energy_sum_bin01.svg")), HasSubstr("<svg"));
  EXPECT_THAT(ReadBytes(dir_.File("svg/nested/validation_curve.svg")), HasSubstr("<svg"));

  CommandResult json = Alice({"--json", "models", "plots", "ele:1", "--out", dir_.File("json")});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto report = ParseJson<google::protobuf::Struct>(json.out);
  EXPECT_EQ(report.fields().at("model").string_value(), "ele:1");
  EXPECT_EQ(report.fields().at("files").list_value().values_size(), 13);
  EXPECT_EQ(report.fields().at("warnings").list_value().values_size(), 1);

  CommandResult format = Alice({"models", "plots", "ele:1", "--out", out, "--format", "gif"});
  EXPECT_EQ(format.exit_code, 2);
  EXPECT_THAT(format.err, HasSubstr("--format: 'gif' is not png or svg"));
  CommandResult no_out = Alice({"models", "plots", "ele:1"});
  EXPECT_EQ(no_out.exit_code, 2);
  CommandResult file_out = Alice({"models", "plots", "ele:1", "--out", out + "/index.md"});
  EXPECT_EQ(file_out.exit_code, 1);
  EXPECT_THAT(file_out.err, HasSubstr("exists and is not a folder"));
  CommandResult missing = Alice({"models", "plots", "ele:7", "--out", dir_.File("none")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, StartsWith("gantry: NOT_FOUND: "));
  EXPECT_FALSE(std::filesystem::exists(dir_.File("none")));

  // A version without histograms (older or failed validation): nothing to plot, said clearly.
  v1::ModelVersion bare;
  bare.set_owner("alice");
  bare.set_name("bare");
  bare.set_particle(v1::PARTICLE_ELECTRON);
  ASSERT_TRUE(models.Register(bare).ok());
  CommandResult nothing = Alice({"models", "plots", "bare:1", "--out", dir_.File("bare")});
  EXPECT_EQ(nothing.exit_code, 1);
  EXPECT_THAT(nothing.err, HasSubstr("FAILED_PRECONDITION: bare:1 has no validation histograms "
                                     "that can be plotted (0 stored)"));
}

TEST_F(CliEndToEndTest, PythonClientExample) {
  // The Debian python3 (with python3-grpcio) runs the example on the gantry-client package.
  const std::string example =
      std::string(GANTRY_PYTHON_CLIENT_DIR) + "/examples/submit_and_list.py";
  CommandResult run = ChildProcess::Run({GANTRY_PYTHON3, example},
                                        {{"PYTHONPATH", std::string(GANTRY_PY_PACKAGE_DIR)},
                                         {"GANTRY_SERVER", server_->address()},
                                         {"GANTRY_TOKEN", alice_token_},
                                         {"GANTRY_CONFIG", std::nullopt},
                                         {"HOME", dir_.path()}},
                                        dir_.path());
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string id = FirstMatch(run.out, "job-[0-9a-f-]+");
  ASSERT_FALSE(id.empty()) << run.out;
  EXPECT_THAT(run.out, HasSubstr("submitted " + id + " JOB_STATE_QUEUED"));
  EXPECT_THAT(run.out, HasSubstr("listed " + id + " python-example JOB_STATE_QUEUED"));
  EXPECT_THAT(run.out, HasSubstr("cancelled " + id + " JOB_STATE_CANCELLED"));
  EXPECT_THAT(run.out, HasSubstr("models 0"));
  EXPECT_THAT(run.out, HasSubstr("error NOT_FOUND: "));
  // The job the Python client made is visible to the CLI under the same token.
  CommandResult get = Alice({"--json", "jobs", "get", id});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(ParseJson<v1::Job>(get.out).spec().labels().at("client"), "python");
}

// A free loopback port (the kernel's choice, released again) so a server can come back on it.
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(address.sin_port);
}

// `jobs watch` survives a server restart: it reconnects and resumes after the last event it
// printed.
TEST(CliWatchReconnectTest, ResumesAfterServerRestart) {
  TestDatabase db;
  TempDir dir;
  gantry::testing::WriteSecretFile(dir.File("admin-token"), absl::StrCat(kAdminToken, "\n"));
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  const std::vector<std::string> server_argv = {GANTRY_SERVER_BINARY,
                                                "--listen",
                                                listen,
                                                "--db",
                                                db.dsn(),
                                                "--data-dir",
                                                dir.File("data"),
                                                "--admin-token-file",
                                                dir.File("admin-token")};
  std::string error;
  auto server = ChildProcess::StartServer(server_argv, dir.File("server1.err"), &error);
  ASSERT_NE(server, nullptr) << error;
  auto gantry = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {GANTRY_CLI_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return ChildProcess::Run(argv,
                             {{"GANTRY_SERVER", listen},
                              {"GANTRY_TOKEN", kAdminToken},
                              {"GANTRY_CONFIG", std::nullopt},
                              {"HOME", dir.path()}},
                             dir.path());
  };
  CommandResult submit =
      gantry({"--json", "jobs", "submit", "--preset", "tiny", "--dataset", "toymc:events=100",
              "--epochs", "1", "--batch", "8", "--world-size", "1"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = ParseJson<v1::Job>(submit.out).id();

  // The watch writes its stdout to a file so the test can see it connect before the restart.
  CommandResult watch;
  const std::string watch_out = dir.File("watch.out");
  std::thread watcher([&] {
    watch =
        ChildProcess::Run({"/bin/sh", "-c", std::string("exec \"$0\" jobs watch \"$1\" > \"$2\""),
                           GANTRY_CLI_BINARY, id, watch_out},
                          {{"GANTRY_SERVER", listen},
                           {"GANTRY_TOKEN", kAdminToken},
                           {"GANTRY_CONFIG", std::nullopt},
                           {"HOME", dir.path()}},
                          dir.path());
  });
  for (int i = 0; i < 600 && ReadBytes(watch_out).find("#1 ") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_THAT(ReadBytes(watch_out), HasSubstr("#1 "));
  server.reset();  // SIGTERM: the open watch stream ends with UNAVAILABLE
  server = ChildProcess::StartServer(server_argv, dir.File("server2.err"), &error);
  ASSERT_NE(server, nullptr) << error;
  CommandResult cancel = gantry({"jobs", "cancel", id});
  watcher.join();
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(watch.exit_code, 1) << watch.out << watch.err;
  EXPECT_THAT(watch.err, HasSubstr("reconnecting"));
  EXPECT_THAT(watch.err, HasSubstr("from event #1"));
  EXPECT_THAT(watch.err, HasSubstr("ended CANCELLED"));
  // Each event exactly once.
  watch.out = ReadBytes(watch_out);
  EXPECT_EQ(watch.out.find("#1 "), watch.out.rfind("#1 ")) << watch.out;
  EXPECT_THAT(watch.out, HasSubstr("#2  state    QUEUED -> CANCELLED")) << watch.out;

  // A watch that never connected fails at once instead of retrying.
  CommandResult nowhere = ChildProcess::Run(
      {GANTRY_CLI_BINARY, "--server", "127.0.0.1:1", "--token", kAdminToken, "jobs", "watch", id},
      {{"HOME", dir.path()}, {"GANTRY_CONFIG", std::nullopt}}, dir.path(), 20);
  EXPECT_EQ(nowhere.exit_code, 1);
  EXPECT_THAT(nowhere.err, StartsWith("gantry: UNAVAILABLE: "));
}

// TLS: a server with --tls-cert/--tls-key is reached with --ca-cert (or GANTRY_CA_CERT, or ca_cert
// in the config file) and refuses plaintext clients.
TEST(CliTlsTest, CaCertConnectsAndPlaintextDoesNot) {
  TestDatabase db;
  TempDir dir;
  CommandResult cert = ChildProcess::Run(
      {"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
       dir.File("key.pem"), "-out", dir.File("cert.pem"), "-days", "1", "-subj", "/CN=localhost",
       "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"},
      {}, dir.path());
  ASSERT_EQ(cert.exit_code, 0) << cert.err;
  gantry::testing::WriteSecretFile(dir.File("admin-token"), absl::StrCat(kAdminToken, "\n"));
  std::string error;
  auto server = ChildProcess::StartServer(
      {GANTRY_SERVER_BINARY, "--listen", "127.0.0.1:0", "--db", db.dsn(), "--data-dir",
       dir.File("data"), "--admin-token-file", dir.File("admin-token"), "--tls-cert",
       dir.File("cert.pem"), "--tls-key", dir.File("key.pem")},
      dir.File("server.err"), &error);
  ASSERT_NE(server, nullptr) << error;
  auto gantry = [&](const std::vector<std::string>& args, EnvChanges env) {
    std::vector<std::string> argv = {GANTRY_CLI_BINARY, "--server", server->address(), "--timeout",
                                     "10"};
    argv.insert(argv.end(), args.begin(), args.end());
    env["HOME"] = dir.path();
    env["GANTRY_SERVER"] = std::nullopt;
    env["GANTRY_CONFIG"] = std::nullopt;
    if (!env.count("GANTRY_CA_CERT")) env["GANTRY_CA_CERT"] = std::nullopt;
    env["GANTRY_TOKEN"] = kAdminToken;
    return ChildProcess::Run(argv, env, dir.path());
  };
  CommandResult flag = gantry({"--ca-cert", dir.File("cert.pem"), "admin", "tenants", "list"}, {});
  EXPECT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_THAT(flag.out, HasSubstr("admin"));
  CommandResult env = gantry({"health"}, {{"GANTRY_CA_CERT", dir.File("cert.pem")}});
  EXPECT_EQ(env.exit_code, 0) << env.err;
  EXPECT_EQ(env.out, "SERVING\n");
  CommandResult plaintext = gantry({"health"}, {});
  EXPECT_EQ(plaintext.exit_code, 1);
  EXPECT_THAT(plaintext.err, StartsWith("gantry: UNAVAILABLE: "));
  CommandResult missing_ca = gantry({"--ca-cert", dir.File("nope.pem"), "health"}, {});
  EXPECT_EQ(missing_ca.exit_code, 1);
  EXPECT_THAT(missing_ca.err, HasSubstr("nope.pem"));

  // The Python client: ca_cert (here from GANTRY_CA_CERT) connects; without it, UNAVAILABLE.
  const std::string script =
      "import grpc, gantry_client\n"
      "c = gantry_client.connect()\n"
      "try:\n"
      "    r = c.admin.ListTenants(c.pb.admin.ListTenantsRequest(), timeout=10)\n"
      "    print('tenants', ' '.join(t.name for t in r.tenants))\n"
      "except grpc.RpcError as e:\n"
      "    print('error', e.code().name)\n";
  auto python = [&](std::optional<std::string> ca_cert) {
    return ChildProcess::Run({GANTRY_PYTHON3, "-c", script},
                             {{"PYTHONPATH", std::string(GANTRY_PY_PACKAGE_DIR)},
                              {"GANTRY_SERVER", server->address()},
                              {"GANTRY_TOKEN", kAdminToken},
                              {"GANTRY_CA_CERT", ca_cert},
                              {"GANTRY_CONFIG", std::nullopt},
                              {"HOME", dir.path()}},
                             dir.path());
  };
  CommandResult py_tls = python(dir.File("cert.pem"));
  EXPECT_EQ(py_tls.exit_code, 0) << py_tls.err;
  EXPECT_THAT(py_tls.out, HasSubstr("tenants admin"));
  CommandResult py_plain = python(std::nullopt);
  EXPECT_EQ(py_plain.exit_code, 0) << py_plain.err;
  EXPECT_THAT(py_plain.out, HasSubstr("error UNAVAILABLE"));
}

}  // namespace
}  // namespace gantry::testing
