// The option building of `gantry-worker daemon` from its flag values (pure).
#include "tests/support/files.h"
#include "workers/agent/agent_flags.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace gantry::agent {
namespace {

// Flags with a valid --server/--join-token.
AgentFlags Valid() {
  AgentFlags f;
  f.server = "127.0.0.1:50051";
  f.join_token = "t0k";
  return f;
}

// The error of building options from `f`.
std::string ErrorOf(const AgentFlags& f) {
  absl::StatusOr<AgentOptions> o = BuildAgentOptions(f);
  if (o.ok()) return "<ok>";
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(o.status().message());
}

// The error of `change` applied on top of Valid().
template <typename Change>
std::string ErrorOfChange(Change change) {
  AgentFlags f = Valid();
  change(f);
  return ErrorOf(f);
}

TEST(AgentFlagsTest, DefaultsMatchTheDocumentedValues) {
  AgentFlags f;
  f.server = "gantry:50051";
  f.join_token = "x";
  absl::StatusOr<AgentOptions> o = BuildAgentOptions(f);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->server, "gantry:50051");
  EXPECT_EQ(o->join_token, "x");
  EXPECT_EQ(o->slots, 1);
  EXPECT_EQ(o->device, gantry::v1::DEVICE_KIND_CPU);
  EXPECT_EQ(o->threads_per_rank, 1);
  EXPECT_TRUE(o->labels.empty());
  EXPECT_EQ(o->cache_dir, "./gantry-cache");
  EXPECT_EQ(o->cache_max_bytes, int64_t{10} << 30);
  EXPECT_EQ(o->advertise_host, "127.0.0.1");
  EXPECT_EQ(o->rendezvous_port_min, 29400);
  EXPECT_EQ(o->rendezvous_port_max, 29499);
  EXPECT_EQ(o->name, "");
  EXPECT_EQ(o->work_dir, "");
  EXPECT_EQ(o->rank_binary, "");
  EXPECT_TRUE(o->ranks_die_with_daemon);
  EXPECT_EQ(o->preemption_grace_ms, 25000);
  EXPECT_EQ(o->collective_timeout_ms, 120000);
}

TEST(AgentFlagsTest, ParsesEveryFlag) {
  AgentFlags f;
  f.server = "10.0.0.1:7000";
  f.join_token_file = "/etc/gantry/join";
  f.name = "node-7.a";
  f.slots = 4;
  f.device = "cpu";
  f.threads = 3;
  f.labels = "pool=onprem,zone=a";
  f.cache_dir = "/var/cache/g";
  f.cache_max_bytes = "2G";
  f.advertise_host = "node7.example";
  f.serve_plaintext = true;
  f.rendezvous_ports = "30000-30009";
  f.work_dir = "/scratch";
  f.rank_binary = "/bin/fake";
  f.ranks_die_with_daemon = "false";
  f.preemption_grace_ms = 0;
  f.collective_timeout_ms = 30000;
  absl::StatusOr<AgentOptions> o = BuildAgentOptions(f);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->join_token_file, "/etc/gantry/join");
  EXPECT_EQ(o->name, "node-7.a");
  EXPECT_EQ(o->slots, 4);
  EXPECT_EQ(o->threads_per_rank, 3);
  EXPECT_EQ(o->labels.size(), 2u);
  EXPECT_EQ(o->labels.at("pool"), "onprem");
  EXPECT_EQ(o->labels.at("zone"), "a");
  EXPECT_EQ(o->cache_dir, "/var/cache/g");
  EXPECT_EQ(o->cache_max_bytes, int64_t{2} << 30);
  EXPECT_EQ(o->advertise_host, "node7.example");
  EXPECT_EQ(o->rendezvous_port_min, 30000);
  EXPECT_EQ(o->rendezvous_port_max, 30009);
  EXPECT_EQ(o->work_dir, "/scratch");
  EXPECT_EQ(o->rank_binary, "/bin/fake");
  EXPECT_FALSE(o->ranks_die_with_daemon);
  f.ranks_die_with_daemon = "0";  // the yes/no words of base/field_checks
  EXPECT_FALSE(BuildAgentOptions(f)->ranks_die_with_daemon);
  f.ranks_die_with_daemon = "1";
  EXPECT_TRUE(BuildAgentOptions(f)->ranks_die_with_daemon);
  EXPECT_EQ(o->preemption_grace_ms, 0);
  EXPECT_EQ(o->collective_timeout_ms, 30000);
}

// Unknown flags, a flag without its value, a value its type rejects (--slots=two) and stray
// arguments are refused by gantry::ParseFlags in main: tests/agent/CMakeLists.txt runs them
// against agent_test_daemon.
TEST(AgentFlagsTest, ErrorsNameTheFlag) {
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) { f.slots = -1; }).find("--slots"), std::string::npos);
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) { f.slots = 1025; }).find("--slots"),
            std::string::npos);
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) { f.threads = -1; }).find("--threads"),
            std::string::npos);
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) { f.device = "tpu"; }).find("--device"),
            std::string::npos);
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) { f.labels = "pool"; }).find("--labels"),
            std::string::npos);
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) { f.labels = "a=1,a=2"; }).find("--labels"),
            std::string::npos);
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) {
              f.rendezvous_ports = "29499-29400";
            }).find("--rendezvous-ports"),
            std::string::npos);
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) {
              f.rendezvous_ports = "70000-70001";
            }).find("--rendezvous-ports"),
            std::string::npos);
  EXPECT_NE(
      ErrorOfChange([](AgentFlags& f) { f.cache_max_bytes = "lots"; }).find("--cache-max-bytes"),
      std::string::npos);
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) { f.name = "bad name"; }).find("--name"),
            std::string::npos);
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) { f.advertise_host = ""; }).find("--advertise-host"),
            std::string::npos);
  EXPECT_NE(
      ErrorOfChange([](AgentFlags& f) { f.join_token_file = "/x"; }).find("--join-token-file"),
      std::string::npos);
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) {
              f.ranks_die_with_daemon = "yes";
            }).find("--ranks-die-with-daemon"),
            std::string::npos);
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) {
              f.preemption_grace_ms = -1;
            }).find("--preemption-grace-ms"),
            std::string::npos);
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) {
              f.collective_timeout_ms = 0;
            }).find("--collective-timeout-ms"),
            std::string::npos);
}

// The router's generation secret travels in clear only on this host: serving on another address
// needs TLS, an explicit --serve-plaintext, or no serving.
TEST(AgentFlagsTest, ServingOffThisHostNeedsTlsOrConsent) {
  AgentFlags f = Valid();
  f.advertise_host = "10.0.0.5";
  absl::StatusOr<AgentOptions> refused = BuildAgentOptions(f);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--serve-port"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("--serve-plaintext"), std::string::npos);
  EXPECT_NE(refused.status().message().find("--tls-cert"), std::string::npos);

  AgentFlags consent = f;
  consent.serve_plaintext = true;
  EXPECT_TRUE(BuildAgentOptions(consent).ok());
  AgentFlags tls = f;
  tls.ca_cert = "/etc/gantry/ca.pem";
  tls.tls_cert = "/etc/gantry/worker.pem";
  tls.tls_key = "/etc/gantry/worker.key";
  EXPECT_TRUE(BuildAgentOptions(tls).ok());
  AgentFlags off = f;
  off.serve_port = -1;
  EXPECT_TRUE(BuildAgentOptions(off).ok());
  for (const char* host : {"127.0.0.1", "localhost", "::1", "127.0.0.2"}) {
    AgentFlags loopback = f;
    loopback.advertise_host = host;
    EXPECT_TRUE(BuildAgentOptions(loopback).ok()) << host;
  }
}

TEST(AgentFlagsTest, RequiresServerAndToken) {
  AgentFlags f;
  f.join_token = "t";
  absl::StatusOr<AgentOptions> o = BuildAgentOptions(f);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--server"), std::string::npos);
  f = AgentFlags();
  f.server = "localhost";
  o = BuildAgentOptions(f);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--server"), std::string::npos);
  f.server = "localhost:1";
  o = BuildAgentOptions(f);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--join-token"), std::string::npos);
}

#ifndef GANTRY_WITH_CUDA
TEST(AgentFlagsTest, TlsFlagsComeTogetherAndNeedTheServersCa) {
  EXPECT_EQ(ErrorOfChange([](AgentFlags& f) { f.tls_cert = "w.pem"; }),
            "--tls-cert: --tls-cert and --tls-key must be given together");
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) {
              f.tls_cert = "w.pem";
              f.tls_key = "w.key";
            }).find("needs --ca-cert"),
            std::string::npos);
  AgentFlags f = Valid();
  f.ca_cert = "ca.pem";
  f.tls_cert = "w.pem";
  f.tls_key = "w.key";
  absl::StatusOr<AgentOptions> o = BuildAgentOptions(f);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->tls_files.ca_cert, "ca.pem");
  EXPECT_EQ(o->tls_files.cert, "w.pem");
  EXPECT_EQ(o->tls_files.key, "w.key");
}

TEST(AgentFlagsTest, ResolveRefusesAnUnreadableCaNamingTheFlag) {
  gantry::testing::TempDir dir;
  AgentFlags f = Valid();
  f.cache_dir = dir.File("cache");
  f.ca_cert = dir.File("missing-ca.pem");
  absl::StatusOr<AgentOptions> o = BuildAgentOptions(f);
  ASSERT_TRUE(o.ok()) << o.status();
  const absl::Status s = ResolveAgentOptions(&*o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--ca-cert: cannot read"), std::string::npos) << s;
}

#endif

// Options as a CUDA build (cuda = true) or a CPU-only build would make them from Valid() with
// `device` and `slots`.
absl::StatusOr<AgentOptions> DeviceOptions(const std::string& device, int slots, bool cuda) {
  AgentFlags f = Valid();
  f.device = device;
  f.slots = slots;
  return BuildAgentOptions(f, cuda);
}

TEST(AgentFlagsTest, GpuNeedsACudaBuild) {
  for (const std::string device : {"gpu:0,1", "gpu"}) {
    absl::StatusOr<AgentOptions> o = DeviceOptions(device, 0, /*cuda=*/false);
    ASSERT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << device;
    EXPECT_NE(o.status().message().find("--device"), std::string::npos) << o.status();
    EXPECT_NE(o.status().message().find("GANTRY_WITH_CUDA"), std::string::npos) << o.status();
    EXPECT_NE(o.status().message().find("use --device=cpu"), std::string::npos) << o.status();
  }
#ifndef GANTRY_WITH_CUDA
  // This build is CPU-only: the plain BuildAgentOptions says the same.
  EXPECT_NE(ErrorOfChange([](AgentFlags& f) { f.device = "gpu:0"; }).find("GANTRY_WITH_CUDA"),
            std::string::npos);
#endif
}

TEST(AgentFlagsTest, AGpuWorkerOffersOneSlotPerGpuByDefault) {
  absl::StatusOr<AgentOptions> o = DeviceOptions("gpu:0,1,3", 0, /*cuda=*/true);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->device, gantry::v1::DEVICE_KIND_GPU);
  EXPECT_EQ(o->device_ids, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(o->slots, 3);
  // Fewer slots than GPUs: allowed (the ranks share the listed GPUs, one each).
  o = DeviceOptions("gpu:2,0", 1, /*cuda=*/true);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->device_ids, (std::vector<int>{2, 0}));
  EXPECT_EQ(o->slots, 1);
  // A CPU worker: one slot unless told.
  o = DeviceOptions("cpu", 0, /*cuda=*/true);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->device, gantry::v1::DEVICE_KIND_CPU);
  EXPECT_TRUE(o->device_ids.empty());
  EXPECT_EQ(o->slots, 1);
  o = DeviceOptions("cpu", 6, /*cuda=*/false);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->slots, 6);
}

TEST(AgentFlagsTest, MoreSlotsThanGpusIsRefusedNamingBothNumbers) {
  absl::StatusOr<AgentOptions> o = DeviceOptions("gpu:0,1", 3, /*cuda=*/true);
  ASSERT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(o.status().message(),
            "--slots: is 3 but --device lists 2 GPU(s); each rank runs on a GPU of its own, so "
            "give at most 2 slots (or leave --slots out: one per GPU)");
}

TEST(AgentFlagsTest, BadGpuListsAreRefusedNamingTheId) {
  const std::pair<std::string, std::string> cases[] = {
      {"gpu", "--device: name the GPU ids, e.g. gpu:0,1"},
      {"gpu:", "--device: \"\" is not a GPU id (0..127)"},
      {"gpu:0,,1", "--device: \"\" is not a GPU id (0..127)"},
      {"gpu:-1", "--device: \"-1\" is not a GPU id (0..127)"},
      {"gpu:128", "--device: \"128\" is not a GPU id (0..127)"},
      {"gpu:a", "--device: \"a\" is not a GPU id (0..127)"},
      {"gpu:0,1,0", "--device: GPU 0 is listed twice; list each GPU once"},
      {"cuda:0", "--device: \"cuda:0\" is neither cpu nor gpu:ID[,ID...]"},
  };
  for (const auto& [device, message] : cases) {
    absl::StatusOr<AgentOptions> o = DeviceOptions(device, 0, /*cuda=*/true);
    ASSERT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << device;
    EXPECT_EQ(o.status().message(), message) << device;
  }
}

TEST(AgentFlagsTest, ResolveReadsTheTokenFileAndMakesDirectoriesAbsolute) {
  gantry::testing::TempDir dir;
  gantry::testing::WriteSecretFile(dir.File("join"), "  s3cret-token\n");
  AgentFlags f;
  f.server = "h:1";
  f.join_token_file = dir.File("join");
  f.cache_dir = dir.File("cache") + "/";
  absl::StatusOr<AgentOptions> o = BuildAgentOptions(f);
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_TRUE(ResolveAgentOptions(&*o).ok());
  EXPECT_EQ(o->join_token, "s3cret-token");
  EXPECT_FALSE(o->name.empty());
  EXPECT_EQ(o->cache_dir, dir.File("cache"));
  EXPECT_EQ(o->work_dir, dir.File("cache") + "/work");

  f = AgentFlags();
  f.server = "h:1";
  f.join_token_file = dir.File("missing");
  o = BuildAgentOptions(f);
  ASSERT_TRUE(o.ok());
  absl::Status s = ResolveAgentOptions(&*o);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("--join-token-file"), std::string::npos) << s;

  // A token others may read is refused: the daemon reads only a private one.
  ::chmod(dir.File("join").c_str(), 0644);
  f.join_token_file = dir.File("join");
  o = BuildAgentOptions(f);
  ASSERT_TRUE(o.ok());
  s = ResolveAgentOptions(&*o);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("chmod 600"), std::string::npos) << s;
}

// The cache holds datasets, checkpoints and the worker's credential: created 0700, an existing one
// of the daemon's user that others may enter is tightened; a file there is refused naming the flag.
TEST(AgentFlagsTest, CacheAndWorkDirectoriesArePrivate) {
  gantry::testing::TempDir dir;
  ASSERT_EQ(::mkdir(dir.File("open-cache").c_str(), 0755), 0);
  ASSERT_EQ(::chmod(dir.File("open-cache").c_str(), 0755), 0);
  AgentFlags f = Valid();
  f.cache_dir = dir.File("open-cache");
  f.work_dir = dir.File("new/scratch");
  absl::StatusOr<AgentOptions> o = BuildAgentOptions(f);
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_TRUE(ResolveAgentOptions(&*o).ok());
  const auto mode = [](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  };
  EXPECT_EQ(mode(dir.File("open-cache")), 0700u);
  EXPECT_EQ(mode(dir.File("new")), 0700u);
  EXPECT_EQ(mode(dir.File("new/scratch")), 0700u);

  std::ofstream(dir.File("a-file")) << "x";
  f.cache_dir = dir.File("a-file");
  o = BuildAgentOptions(f);
  ASSERT_TRUE(o.ok()) << o.status();
  const absl::Status s = ResolveAgentOptions(&*o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--cache-dir"), std::string::npos) << s;
  EXPECT_NE(s.message().find("is not a directory"), std::string::npos) << s;
}

}  // namespace
}  // namespace gantry::agent
