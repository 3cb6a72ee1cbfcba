// CommandRunner and the provisioners with real processes (no server): exit codes and the last
// output line as the error, timeouts that kill the whole process group, daemons left running in
// their own session not blocking the call, argv and environment as documented, ValidatePool's
// messages, and the Slurm pilot script's quoting.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "server/pools/command_provisioner.h"
#include "server/pools/command_runner.h"
#include "server/pools/slurm_provisioner.h"
#include "server/requests/pool_requests.h"
#include "tests/support/child_process.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace gantry::server {
namespace {

using gantry::testing::ChildProcess;
using gantry::testing::CommandResult;
using gantry::testing::ReadFile;
using gantry::testing::TempDir;

// Alive and not a zombie (a killed orphan waits for its new parent to reap it).
bool Running(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

TEST(CommandRunnerTest, ExitCodeAndLastOutputLine) {
  CommandRequest request;
  request.argv = {"/bin/sh", "-c", "echo starting; echo 'quota exceeded' >&2; exit 3"};
  absl::StatusOr<CommandOutcome> out = CommandRunner::Run(request);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->ok());
  EXPECT_EQ(out->exit_code, 3);
  EXPECT_EQ(out->Describe(), "exited with code 3: quota exceeded");
}

TEST(CommandRunnerTest, TimeoutKillsTheProcessGroup) {
  TempDir dir;
  const std::string pid_file = dir.path() + "/child.pid";
  CommandRequest request;
  // A child in the same process group that would outlive its parent.
  request.argv = {"/bin/sh", "-c", "sleep 300 & echo $! > " + pid_file + "; wait"};
  request.timeout = absl::Milliseconds(500);
  const absl::Time start = absl::Now();
  absl::StatusOr<CommandOutcome> out = CommandRunner::Run(request);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->timed_out);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  int pid = 0;
  std::ifstream(pid_file) >> pid;
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 50 && Running(pid); ++i) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(Running(pid)) << "the command's child survived its timeout";
}

TEST(CommandRunnerTest, CancellationEndsARunAtOnce) {
  std::atomic<bool> cancelled{false};
  CommandRequest request;
  request.argv = {"/bin/sleep", "300"};
  request.timeout = absl::Seconds(300);
  request.cancelled = &cancelled;
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(200));
    cancelled.store(true);
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<CommandOutcome> out = CommandRunner::Run(request);
  stopper.join();
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(CommandRunnerTest, DaemonsInTheirOwnSessionDoNotBlockAndSurvive) {
  TempDir dir;
  const std::string pid_file = dir.path() + "/daemon.pid";
  CommandRequest request;
  request.argv = {"/bin/sh", "-c", "setsid sleep 300 & echo $! > " + pid_file + "; echo started"};
  request.timeout = absl::Seconds(10);
  const absl::Time start = absl::Now();
  absl::StatusOr<CommandOutcome> out = CommandRunner::Run(request);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->ok()) << out->Describe();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // stdout is a file: no wait for EOF
  int pid = 0;
  std::ifstream(pid_file) >> pid;
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(Running(pid));
  kill(pid, SIGKILL);
}

TEST(CommandRunnerTest, MissingBinaryIsExitCode127) {
  CommandRequest request;
  request.argv = {"/nonexistent/scale-up"};
  absl::StatusOr<CommandOutcome> out = CommandRunner::Run(request);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->exit_code, 127);
}

TEST(CommandProvisionerTest, ArgvAndEnvironment) {
  TempDir dir;
  const std::string seen = dir.path() + "/seen";
  gantry::v1::CommandProvisioner spec;
  spec.add_scale_up("/bin/sh");
  spec.add_scale_up("-c");
  spec.add_scale_up("echo \"$0 $1 $GANTRY_POOL $GANTRY_COUNT\" > " + seen);
  spec.add_scale_down("/bin/sh");
  spec.add_scale_down("-c");
  spec.add_scale_down("echo \"$0 $1 $2 $3 [$GANTRY_WORKERS]\" > " + seen);
  CommandProvisioner provisioner(spec);
  ASSERT_TRUE(provisioner.ScaleUp("burst", 3).ok());
  std::string line;
  std::getline(std::ifstream(seen), line);
  EXPECT_EQ(line, "burst 3 burst 3");
  ASSERT_TRUE(provisioner.ScaleDown("burst", {{"wrk-1", "b-w1", {}}, {"wrk-2", "b-w2", {}}}).ok());
  std::getline(std::ifstream(seen), line);
  EXPECT_EQ(line, "burst 2 b-w1 b-w2 [b-w1 b-w2]");
}

TEST(CommandProvisionerTest, FailureAndTimeoutAreClearErrors) {
  gantry::v1::CommandProvisioner spec;
  spec.add_scale_up("/bin/sh");
  spec.add_scale_up("-c");
  spec.add_scale_up("echo 'error: no capacity in zone a' >&2; exit 2");
  absl::Status st = CommandProvisioner(spec).ScaleUp("burst", 1);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(st.message(), "exited with code 2: error: no capacity in zone a"))
      << st;
  spec.set_scale_up(2, "sleep 30");
  spec.set_timeout_seconds(1);
  st = CommandProvisioner(spec).ScaleUp("burst", 1);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(st.message(), "timed out after 1s")) << st;
}

TEST(SlurmProvisionerTest, PilotScriptQuotesEveryValue) {
  gantry::v1::SlurmProvisioner spec;
  spec.set_server_address("head:50051");
  spec.set_join_token_file("/shared/it's/token");
  spec.set_worker_binary("/opt/gantry/gantry-worker");
  spec.set_work_dir("/scratch/g");
  spec.set_idle_exit_seconds(7);
  spec.add_daemon_args("--threads=$(reboot)");
  SlurmProvisioner provisioner(spec, 2, {{"zone", "a"}});
  const std::string script = provisioner.PilotScript("hpc");
  EXPECT_TRUE(absl::StrContains(script, "'--join-token-file=/shared/it'\\''s/token'")) << script;
  EXPECT_TRUE(absl::StrContains(script, "'--threads=$(reboot)'")) << script;
  EXPECT_TRUE(absl::StrContains(script, "\"--labels=pool=hpc,slurm-job=${SLURM_JOB_ID},zone=a\""));
  EXPECT_TRUE(absl::StrContains(script, "'--idle-exit-after=7s'"));
  EXPECT_TRUE(absl::StrContains(script, "'--slots=2'"));
  EXPECT_TRUE(absl::StrContains(script, "\"--name=hpc-pilot-${SLURM_JOB_ID}\""));
}

// The pilot script run by sh as Slurm would, with a worker binary that records its arguments: each
// run gets its own new cache directory of mode 0700, whose name a user who shares the work
// directory (a default /tmp) cannot know in advance.
TEST(SlurmProvisionerTest, PilotCacheDirectoryIsNewPrivateAndUnguessable) {
  TempDir dir;
  const std::string fake = dir.path() + "/gantry-worker";
  std::ofstream(fake) << "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> '"
                      << dir.path() << "/args'\n";
  ASSERT_EQ(chmod(fake.c_str(), 0755), 0);
  gantry::v1::SlurmProvisioner spec;
  spec.set_server_address("head:50051");
  spec.set_join_token_file("/t");
  spec.set_worker_binary(fake);
  spec.set_work_dir(dir.path() + "/work");
  const std::string script = SlurmProvisioner(spec, 1, {}).PilotScript("hpc");
  // Another user got there first with the name a predictable scheme would use.
  ASSERT_EQ(mkdir((dir.path() + "/work").c_str(), 0777), 0);
  ASSERT_EQ(symlink("/", (dir.path() + "/work/gantry-pilot-42").c_str()), 0);
  for (int run = 0; run < 2; ++run) {
    CommandResult ran =
        ChildProcess::Run({"/bin/sh", "-c", script}, {{"SLURM_JOB_ID", "42"}}, dir.path());
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
  }
  std::vector<std::string> caches;
  std::istringstream args(ReadFile(dir.path() + "/args"));
  for (std::string line; std::getline(args, line);) {
    if (absl::StartsWith(line, "--cache-dir=")) caches.push_back(line.substr(12));
  }
  ASSERT_EQ(caches.size(), 2u);
  EXPECT_NE(caches[0], caches[1]);
  for (const std::string& cache : caches) {
    EXPECT_TRUE(absl::StartsWith(cache, dir.path() + "/work/gantry-pilot-42-")) << cache;
    struct stat st {};
    ASSERT_EQ(lstat(cache.c_str(), &st), 0) << cache;
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << cache;
    EXPECT_EQ(st.st_mode & 07777, 0700u) << cache;
  }
}

TEST(SlurmProvisionerTest, ScancelGetsOnlySlurmJobIdsAfterTheEndOfOptions) {
  // A scancel on PATH that records its arguments, one per line.
  TempDir dir;
  const std::string args = dir.path() + "/args";
  const std::string fake = dir.path() + "/scancel";
  std::ofstream(fake) << "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> '" << args
                      << "'; done\n";
  ASSERT_EQ(chmod(fake.c_str(), 0755), 0);
  const std::string path = getenv("PATH") != nullptr ? getenv("PATH") : "";
  setenv("PATH", (dir.path() + ":" + path).c_str(), 1);
  gantry::v1::SlurmProvisioner spec;
  spec.set_server_address("head:50051");
  spec.set_join_token_file("/t");
  spec.set_worker_binary("/w");
  // Labels come from the workers' registrations: options and shell text are no job ids.
  std::vector<ProvisionedWorker> workers = {
      {"w1", "a", {{"slurm-job", "123"}}},  {"w2", "b", {{"slurm-job", "--signal=KILL"}}},
      {"w3", "c", {{"slurm-job", "45_6"}}}, {"w4", "d", {{"slurm-job", "7;reboot"}}},
      {"w5", "e", {{"slurm-job", "_8"}}},   {"w6", "f", {{"zone", "a"}}},
      {"w7", "g", {{"slurm-job", "-1"}}}};
  const absl::Status st = SlurmProvisioner(spec, 1, {}).ScaleDown("hpc", workers);
  setenv("PATH", path.c_str(), 1);
  ASSERT_TRUE(st.ok()) << st;
  std::ifstream in(args);
  std::vector<std::string> got;
  for (std::string line; std::getline(in, line);) got.push_back(line);
  EXPECT_EQ(got, (std::vector<std::string>{"--", "123", "45_6"}));
}

TEST(SlurmProvisionerTest, UnreachableSlurmIsAClearError) {
  TempDir dir;
  // A slurm.conf naming a controller nobody listens on.
  const std::string conf = dir.path() + "/slurm.conf";
  std::ofstream(conf) << "ClusterName=none\nSlurmctldHost=localhost(127.0.0.1)\n"
                         "SlurmctldPort=49839\nAuthType=auth/munge\n"
                         "NodeName=n CPUs=1\nPartitionName=p Nodes=n Default=YES\n";
  gantry::v1::SlurmProvisioner spec;
  spec.set_server_address("head:50051");
  spec.set_join_token_file("/t");
  spec.set_worker_binary("/w");
  spec.set_slurm_conf(conf);
  spec.set_timeout_seconds(20);
  absl::Status st = SlurmProvisioner(spec, 1, {}).ScaleUp("hpc", 1);
  EXPECT_FALSE(st.ok());
  // sbatch gives up after ~9 s of retries.
  EXPECT_TRUE(absl::StrContains(st.message(), "Unable to contact slurm controller")) << st;
}

TEST(ValidatePoolTest, MessagesSayWhatToChange) {
  gantry::v1::PoolSpec spec;
  spec.set_max_workers(2);
  spec.mutable_provisioner()->mutable_command()->add_scale_up("/bin/true");
  EXPECT_TRUE(ValidatePool("burst", spec).ok());
  gantry::v1::PoolSpec bad = spec;
  bad.set_price_per_device_hour(-0.5);
  EXPECT_TRUE(absl::StrContains(ValidatePool("burst", bad).message(),
                                "spec.price_per_device_hour: -0.5 is not a price"));
  bad = spec;
  bad.set_min_workers(5);
  EXPECT_TRUE(absl::StrContains(ValidatePool("burst", bad).message(),
                                "min_workers 5 is above max_workers 2"));
  bad = spec;
  bad.mutable_provisioner()->mutable_command()->set_scale_up(0, "true");
  EXPECT_TRUE(absl::StrContains(ValidatePool("burst", bad).message(), "absolute path"));
  bad = spec;
  bad.mutable_provisioner()->mutable_slurm()->set_server_address("head:50051");
  bad.mutable_provisioner()->mutable_slurm()->set_join_token_file("/t");
  bad.mutable_provisioner()->mutable_slurm()->set_worker_binary("/w");
  EXPECT_TRUE(ValidatePool("hpc", bad).ok());
  bad.mutable_provisioner()->mutable_slurm()->add_sbatch_args("-A calo");
  EXPECT_TRUE(absl::StrContains(ValidatePool("hpc", bad).message(), "is not an option"));
  EXPECT_TRUE(absl::StrContains(ValidatePool("HPC", spec).message(), "pool name"));
  gantry::v1::PoolSpec fixed;  // static: no max needed
  EXPECT_TRUE(ValidatePool("onprem", fixed).ok());
}

}  // namespace
}  // namespace gantry::server
