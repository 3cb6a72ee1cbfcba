// RankLauncher with real child processes (the fake_rank program): frame forwarding, exit codes,
// crashes, cancellation with SIGTERM and with the SIGKILL escalation.
#include "workers/agent/rank_launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/metrics/metrics_registry.h"
#include "tests/support/build_paths.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace gantry::agent {
namespace {

namespace v1 = ::gantry::v1;

using ::gantry::testing::ReadFile;

// Thread-safe record of what the launcher sent.
class Collector {
 public:
  void Add(v1::WorkerMessage m) {
    absl::MutexLock lock(&mu_);
    messages_.push_back(std::move(m));
  }
  std::vector<v1::WorkerMessage> Of(const std::string& job) {
    absl::MutexLock lock(&mu_);
    std::vector<v1::WorkerMessage> out;
    for (const auto& m : messages_)
      if (m.job_id() == job) out.push_back(m);
    return out;
  }
  // Waits for the RANK_EXITED of (job, rank) and returns it.
  // With attempt >= 0, only that attempt's.
  std::optional<v1::RankStatus> WaitExited(const std::string& job, int rank, absl::Duration timeout,
                                           int attempt = -1) {
    absl::MutexLock lock(&mu_);
    std::optional<v1::RankStatus> found;
    auto check = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& m : messages_) {
        if (m.job_id() == job && m.has_rank_status() && m.rank_status().rank() == rank &&
            m.rank_status().phase() == v1::RANK_PHASE_EXITED &&
            (attempt < 0 || m.attempt() == attempt)) {
          found = m.rank_status();
          return true;
        }
      }
      return false;
    };
    mu_.AwaitWithTimeout(absl::Condition(&check), timeout);
    return found;
  }
  // Waits until the rank of (job, attempt) reported RANK_RUNNING (its SIGUSR1 handler is set).
  bool WaitRunning(const std::string& job, int attempt, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto check = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& m : messages_) {
        if (m.job_id() == job && m.attempt() == attempt && m.has_rank_status() &&
            m.rank_status().phase() == v1::RANK_PHASE_RUNNING) {
          return true;
        }
      }
      return false;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&check), timeout);
  }
  // Waits until the job has sent at least `n` messages.
  bool WaitCount(const std::string& job, size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto check = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      size_t c = 0;
      for (const auto& m : messages_) c += m.job_id() == job ? 1 : 0;
      return c >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&check), timeout);
  }

 private:
  absl::Mutex mu_;
  std::vector<v1::WorkerMessage> messages_ ABSL_GUARDED_BY(mu_);
};

class RankLauncherTest : public ::testing::Test {
 protected:
  RankLauncherTest() {
    RankLauncherOptions o;
    o.rank_binary = FAKE_RANK_BINARY;
    o.server = "127.0.0.1:1";
    o.cache_dir = dir_.File("cache");
    o.cache_max_bytes = 123456789;
    o.work_root = dir_.File("work");
    o.kill_grace = absl::Seconds(5);
    o.default_collective_timeout_ms = 45000;
    launcher_ = std::make_unique<RankLauncher>(
        o, [this](v1::WorkerMessage m) { collector_.Add(std::move(m)); });
  }

  static v1::Assignment Assign(const std::string& job, int rank,
                               std::map<std::string, std::string> labels = {}, int attempt = 0) {
    v1::Assignment a;
    a.set_job_id(job);
    a.set_attempt(attempt);
    a.set_rank(rank);
    a.set_world_size(rank + 1);
    a.set_rank_credential("grk_secret-of-" + job);
    a.set_rendezvous_secret(std::string(64, 'e'));
    for (const auto& [k, v] : labels) (*a.mutable_spec()->mutable_labels())[k] = v;
    return a;
  }
  std::string WorkDir(const std::string& job, int rank) const {
    return dir_.File("work") + "/" + job + "/rank-" + std::to_string(rank);
  }
  // Waits until the fake rank has written its argv (it is past exec and set-up).
  bool WaitStarted(const std::string& job) {
    return collector_.WaitCount(job, 2, absl::Seconds(10));  // STARTING, then the rank's RUNNING
  }

  gantry::testing::TempDir dir_;
  Collector collector_;
  std::unique_ptr<RankLauncher> launcher_;
};

TEST_F(RankLauncherTest, ForwardsFramesInOrderAndReportsTheExitCode) {
  ASSERT_TRUE(
      launcher_->Launch(Assign("job-a", 1, {{"fake.frames", "50"}, {"fake.exit", "3"}})).ok());
  std::optional<v1::RankStatus> exited = collector_.WaitExited("job-a", 1, absl::Seconds(20));
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->exit_code(), 3);

  const std::vector<v1::WorkerMessage> got = collector_.Of("job-a");
  // STARTING (daemon), RUNNING, 50 progress, the result (rank), EXITED (daemon).
  ASSERT_EQ(got.size(), 54u);
  EXPECT_EQ(got[0].rank_status().phase(), v1::RANK_PHASE_STARTING);
  EXPECT_EQ(got[0].rank_status().rank(), 1);
  EXPECT_EQ(got[1].rank_status().phase(), v1::RANK_PHASE_RUNNING);
  for (int i = 1; i <= 50; ++i) {
    ASSERT_TRUE(got[1 + i].has_progress()) << i;
    EXPECT_EQ(got[1 + i].progress().step(), i);
  }
  EXPECT_TRUE(got[52].has_result());
  EXPECT_EQ(got[52].result().message(), "fake result of rank 1");
  EXPECT_EQ(got[53].rank_status().phase(), v1::RANK_PHASE_EXITED);
  EXPECT_EQ(launcher_->live_ranks(), 0);

  // The rank's command line and environment: its credential travels only in a 0600 file in its
  // 0700 work dir (not on argv, not in env, not in the assignment file); no fd leaked.
  const std::string args = ReadFile(WorkDir("job-a", 1) + "/args.txt");
  EXPECT_NE(args.find("\nrank\n"), std::string::npos) << args;
  EXPECT_NE(args.find("--assignment=" + WorkDir("job-a", 1) + "/assignment.pb"), std::string::npos);
  EXPECT_NE(args.find("--control-fd=3"), std::string::npos);
  EXPECT_NE(args.find("--server=127.0.0.1:1"), std::string::npos);
  EXPECT_NE(args.find("--cache-dir=" + dir_.File("cache")), std::string::npos);
  EXPECT_NE(args.find("--cache-max-bytes=123456789"), std::string::npos) << args;
  EXPECT_NE(args.find("--work-dir=" + WorkDir("job-a", 1)), std::string::npos);
  EXPECT_NE(args.find("\n--device=cpu\n"), std::string::npos) << "a CPU worker's rank: " << args;
  EXPECT_EQ(args.find("grk_secret-of-job-a"), std::string::npos);
  EXPECT_NE(args.find("--credential-file=" + WorkDir("job-a", 1) + "/rank.credential"),
            std::string::npos)
      << args;
  EXPECT_EQ(ReadFile(WorkDir("job-a", 1) + "/token.txt"), "grk_secret-of-job-a");
  EXPECT_EQ(ReadFile(WorkDir("job-a", 1) + "/env_token.txt"), "<unset>");
  EXPECT_EQ(ReadFile(WorkDir("job-a", 1) + "/credential_mode.txt"), "384 448");  // 0600, 0700
  EXPECT_EQ(ReadFile(WorkDir("job-a", 1) + "/assignment.pb").find("grk_"), std::string::npos);
  // The rendezvous secret only in the assignment file, which is 0600 too.
  EXPECT_EQ(args.find(std::string(64, 'e')), std::string::npos);
  v1::Assignment stored;
  ASSERT_TRUE(stored.ParseFromString(ReadFile(WorkDir("job-a", 1) + "/assignment.pb")));
  EXPECT_EQ(stored.rendezvous_secret(), std::string(64, 'e'));
  struct stat st;
  ASSERT_EQ(stat((WorkDir("job-a", 1) + "/assignment.pb").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadFile(WorkDir("job-a", 1) + "/leaked_fds.txt"), "0");
  EXPECT_NE(ReadFile(WorkDir("job-a", 1) + "/rank.log").find("fake rank 1 of job-a starting"),
            std::string::npos);
}

TEST_F(RankLauncherTest, RankMetricsStayInTheDaemonAndBadOnesAreDropped) {
  ASSERT_TRUE(
      launcher_->Launch(Assign("job-m", 5, {{"fake.metrics", "3"}, {"fake.bad_metrics", "1"}}))
          .ok());
  ASSERT_TRUE(collector_.WaitExited("job-m", 5, absl::Seconds(20)).has_value());
  // STARTING, RUNNING, 3 progress, the result, EXITED: no RankMetrics reaches the server's sink.
  const std::vector<v1::WorkerMessage> got = collector_.Of("job-m");
  ASSERT_EQ(got.size(), 7u);
  for (const v1::WorkerMessage& m : got) EXPECT_FALSE(m.has_rank_metrics());

  metrics::MetricsRegistry& registry = metrics::ProcessMetrics();
  const std::string page = registry.Render();
  // 3 good frames of 2 steps each; the bad frame (1000 steps, a negative time) is dropped whole.
  EXPECT_NE(page.find("gantry_worker_rank_steps_total{rank=\"5\"} 6\n"), std::string::npos) << page;
  EXPECT_NE(page.find("gantry_worker_rank_step_seconds_count{rank=\"5\"} 6\n"), std::string::npos);
  EXPECT_NE(page.find("gantry_worker_rank_step_seconds_bucket{rank=\"5\",le=\"0.1\"} 3\n"),
            std::string::npos);
  EXPECT_NE(page.find("gantry_worker_rank_samples_total{rank=\"5\"} 48\n"), std::string::npos);
  EXPECT_NE(page.find("gantry_worker_dataset_cache_hits_total 3\n"), std::string::npos);
  // The running rank's gauges went with it.
  EXPECT_EQ(page.find("gantry_worker_rank_samples_per_second{"), std::string::npos) << page;
}

TEST_F(RankLauncherTest, ExitMessageIsTheLastErrorLogElseTheLogTail) {
  ASSERT_TRUE(
      launcher_->Launch(Assign("job-err", 0, {{"fake.mode", "error-log"}, {"fake.exit", "1"}}))
          .ok());
  ASSERT_TRUE(
      launcher_->Launch(Assign("job-tail", 0, {{"fake.log_lines", "30"}, {"fake.exit", "2"}}))
          .ok());
  std::optional<v1::RankStatus> err = collector_.WaitExited("job-err", 0, absl::Seconds(20));
  std::optional<v1::RankStatus> tail = collector_.WaitExited("job-tail", 0, absl::Seconds(20));
  ASSERT_TRUE(err.has_value() && tail.has_value());
  EXPECT_EQ(err->exit_code(), 1);
  EXPECT_EQ(err->message(), "dataset toymc: out of memory in rank 0");
  EXPECT_EQ(tail->exit_code(), 2);
  // The last 20 lines of rank.log: stderr lines 11..30.
  EXPECT_EQ(tail->message().find("stderr line 10\n"), std::string::npos) << tail->message();
  EXPECT_EQ(tail->message().rfind("stderr line 11\n", 0), 0u) << tail->message();
  EXPECT_NE(tail->message().find("stderr line 30"), std::string::npos);
}

TEST_F(RankLauncherTest, ACrashingOrKilledRankIsReportedAndTheLauncherKeepsWorking) {
  ASSERT_TRUE(launcher_->Launch(Assign("job-crash", 0, {{"fake.mode", "crash"}})).ok());
  std::optional<v1::RankStatus> crashed = collector_.WaitExited("job-crash", 0, absl::Seconds(20));
  ASSERT_TRUE(crashed.has_value());
  EXPECT_EQ(crashed->exit_code(), -SIGSEGV);

  ASSERT_TRUE(launcher_->Launch(Assign("job-kill", 0, {{"fake.mode", "sleep"}})).ok());
  ASSERT_TRUE(WaitStarted("job-kill"));
  // Someone else (the OOM killer, an operator) SIGKILLs the rank.
  ASSERT_EQ(launcher_->running_jobs(), std::vector<std::string>{"job-kill"});
  const pid_t pid = std::atoi(ReadFile(WorkDir("job-kill", 0) + "/pid.txt").c_str());
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  std::optional<v1::RankStatus> killed = collector_.WaitExited("job-kill", 0, absl::Seconds(10));
  ASSERT_TRUE(killed.has_value());
  EXPECT_EQ(killed->exit_code(), -SIGKILL);

  ASSERT_TRUE(launcher_->Launch(Assign("job-after", 2, {{"fake.exit", "0"}})).ok());
  std::optional<v1::RankStatus> after = collector_.WaitExited("job-after", 2, absl::Seconds(20));
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->exit_code(), 0);
  EXPECT_TRUE(launcher_->WaitIdle(absl::Seconds(5)));
}

TEST_F(RankLauncherTest, DuplicateAssignmentIsRefusedWhileTheRankRuns) {
  ASSERT_TRUE(launcher_->Launch(Assign("job-dup", 0, {{"fake.mode", "sleep"}})).ok());
  const absl::Status again = launcher_->Launch(Assign("job-dup", 0, {{"fake.mode", "sleep"}}));
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_EQ(launcher_->live_ranks(), 1);
  EXPECT_EQ(launcher_->Launch(Assign("../etc", 0)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(launcher_->Cancel("job-dup"), 1);
  ASSERT_TRUE(collector_.WaitExited("job-dup", 0, absl::Seconds(5)).has_value());
  int starting = 0;
  for (const auto& m : collector_.Of("job-dup")) {
    starting += m.has_rank_status() && m.rank_status().phase() == v1::RANK_PHASE_STARTING ? 1 : 0;
  }
  EXPECT_EQ(starting, 1);
}

TEST_F(RankLauncherTest, AttemptsAreKeyedApartAndCheckpointAndStopSendsSigusr1) {
  const std::map<std::string, std::string> sleep = {{"fake.mode", "sleep"}};
  ASSERT_TRUE(launcher_->Launch(Assign("job-r", 0, sleep, 0)).ok());
  // The next attempt's rank 0 starts while attempt 0's still runs; the same attempt twice does not.
  v1::Assignment next = Assign("job-r", 0, sleep, 1);
  next.set_collective_timeout_ms(7000);
  ASSERT_TRUE(launcher_->Launch(next).ok());
  EXPECT_EQ(launcher_->Launch(Assign("job-r", 0, sleep, 1)).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(launcher_->Launch(Assign("job-r", 0, sleep, -1)).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(collector_.WaitRunning("job-r", 0, absl::Seconds(10)));
  ASSERT_TRUE(collector_.WaitRunning("job-r", 1, absl::Seconds(10)));
  EXPECT_EQ(launcher_->live_ranks(), 2);
  EXPECT_EQ(launcher_->running_jobs(), std::vector<std::string>{"job-r"});
  // Attempt 0 keeps today's work dir; later attempts get their own.
  const std::string attempt1_dir = dir_.File("work") + "/job-r/attempt-1/rank-0";
  EXPECT_NE(ReadFile(WorkDir("job-r", 0) + "/args.txt").find("--work-dir=" + WorkDir("job-r", 0)),
            std::string::npos);
  EXPECT_NE(ReadFile(attempt1_dir + "/args.txt").find("--work-dir=" + attempt1_dir),
            std::string::npos);
  // The daemon's collective timeout fills in an assignment's 0; a job's own value stays.
  v1::Assignment written;
  ASSERT_TRUE(written.ParseFromString(ReadFile(WorkDir("job-r", 0) + "/assignment.pb")));
  EXPECT_EQ(written.collective_timeout_ms(), 45000);
  ASSERT_TRUE(written.ParseFromString(ReadFile(attempt1_dir + "/assignment.pb")));
  EXPECT_EQ(written.collective_timeout_ms(), 7000);
  EXPECT_EQ(written.attempt(), 1);

  // Only attempt 0 is asked to checkpoint and stop; it exits 200 after SIGUSR1.
  EXPECT_EQ(launcher_->CheckpointAndStop("job-r", 0), 1);
  EXPECT_EQ(launcher_->CheckpointAndStop("job-none", -1), 0);
  std::optional<v1::RankStatus> first = collector_.WaitExited("job-r", 0, absl::Seconds(10), 0);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->exit_code(), 200);
  EXPECT_EQ(ReadFile(WorkDir("job-r", 0) + "/usr1.txt"), "SIGUSR1");
  EXPECT_EQ(ReadFile(attempt1_dir + "/usr1.txt"), "");
  EXPECT_EQ(launcher_->live_ranks(), 1);

  // attempt < 0: every attempt of the job.
  EXPECT_EQ(launcher_->CheckpointAndStop("job-r", -1), 1);
  std::optional<v1::RankStatus> second = collector_.WaitExited("job-r", 0, absl::Seconds(10), 1);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->exit_code(), 200);
  EXPECT_EQ(launcher_->live_ranks(), 0);
  EXPECT_EQ(ReadFile(attempt1_dir + "/usr1.txt"), "SIGUSR1");

  // Every forwarded message carries its rank's attempt: both exits, 200, one per attempt.
  std::map<int, int> exits_by_attempt;
  int checkpoint_logs = 0;
  for (const v1::WorkerMessage& m : collector_.Of("job-r")) {
    if (m.has_rank_status() && m.rank_status().phase() == v1::RANK_PHASE_EXITED) {
      EXPECT_EQ(m.rank_status().exit_code(), 200);
      ++exits_by_attempt[m.attempt()];
    }
    if (m.has_log() && m.log().text() == "checkpointed on SIGUSR1") ++checkpoint_logs;
    if (m.has_progress()) EXPECT_TRUE(m.attempt() == 0 || m.attempt() == 1);
  }
  EXPECT_EQ(exits_by_attempt, (std::map<int, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(checkpoint_logs, 2);
}

TEST_F(RankLauncherTest, CancellationStopsRanksWithinSecondsAndEscalatesToSigkill) {
  ASSERT_TRUE(launcher_->Launch(Assign("job-c", 0, {{"fake.mode", "sleep"}})).ok());
  ASSERT_TRUE(launcher_->Launch(Assign("job-c", 1, {{"fake.mode", "ignore-term"}})).ok());
  ASSERT_TRUE(launcher_->Launch(Assign("job-other", 0, {{"fake.mode", "sleep"}})).ok());
  ASSERT_TRUE(WaitStarted("job-c"));
  ASSERT_TRUE(collector_.WaitCount("job-c", 4, absl::Seconds(10)));  // both ranks running
  // The deaf rank's grandchild must exist before the cancellation.
  for (int i = 0; i < 200 && ReadFile(WorkDir("job-c", 1) + "/grandchild.pid").empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const pid_t grandchild = std::atoi(ReadFile(WorkDir("job-c", 1) + "/grandchild.pid").c_str());
  ASSERT_GT(grandchild, 0);
  EXPECT_EQ(launcher_->live_ranks(), 3);

  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(launcher_->Cancel("job-c"), 2);
  std::optional<v1::RankStatus> polite = collector_.WaitExited("job-c", 0, absl::Seconds(3));
  ASSERT_TRUE(polite.has_value());
  EXPECT_EQ(polite->exit_code(), -SIGTERM);
  const double polite_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(polite_s, 2.0);

  std::optional<v1::RankStatus> deaf = collector_.WaitExited("job-c", 1, absl::Seconds(10));
  ASSERT_TRUE(deaf.has_value());
  EXPECT_EQ(deaf->exit_code(), -SIGKILL);
  const double deaf_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(deaf_s, 4.5);
  EXPECT_LT(deaf_s, 7.0);
  // The whole process group went: the grandchild is gone (or a zombie awaiting init) once the
  // SIGKILL has been delivered.
  std::string state;
  for (int i = 0; i < 100; ++i) {
    state = ReadFile("/proc/" + std::to_string(grandchild) + "/stat");
    if (state.empty() || state.find(") Z ") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(state.empty() || state.find(") Z ") != std::string::npos) << state;

  // Only job-c's slots are free; the other job runs on.
  EXPECT_EQ(launcher_->live_ranks(), 1);
  EXPECT_EQ(launcher_->running_jobs(), std::vector<std::string>{"job-other"});
  launcher_->StopAll();
  std::optional<v1::RankStatus> other = collector_.WaitExited("job-other", 0, absl::Seconds(1));
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->exit_code(), -SIGTERM);
  EXPECT_EQ(launcher_->Launch(Assign("job-late", 0)).code(), absl::StatusCode::kUnavailable);
}

TEST_F(RankLauncherTest, SlotLimitAndExecFailure) {
  RankLauncherOptions o;
  o.rank_binary = dir_.File("no-such-binary");
  o.work_root = dir_.File("work2");
  o.max_ranks = 1;
  Collector c;
  RankLauncher launcher(o, [&c](v1::WorkerMessage m) { c.Add(std::move(m)); });
  ASSERT_TRUE(launcher.Launch(Assign("job-x", 0)).ok());
  std::optional<v1::RankStatus> failed = c.WaitExited("job-x", 0, absl::Seconds(10));
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->exit_code(), 127);
  EXPECT_NE(failed->message().find("exec"), std::string::npos) << failed->message();
  ASSERT_TRUE(launcher.WaitIdle(absl::Seconds(5)));

  RankLauncherOptions slow = o;
  slow.rank_binary = FAKE_RANK_BINARY;
  RankLauncher one_slot(slow, [&c](v1::WorkerMessage m) { c.Add(std::move(m)); });
  ASSERT_TRUE(one_slot.Launch(Assign("job-y", 0, {{"fake.mode", "sleep"}})).ok());
  EXPECT_EQ(one_slot.Launch(Assign("job-z", 0)).code(), absl::StatusCode::kResourceExhausted);
}

// A GPU worker: every live rank holds a GPU of its own (the first free one in the worker's list),
// passed as --device=cuda:N; the GPU is free again once the rank is reaped; with every GPU held a
// launch is refused, and a launch that fails before its rank starts gives its GPU back.
TEST_F(RankLauncherTest, EachLiveRankHoldsItsOwnGpuUntilItIsReaped) {
  RankLauncherOptions o;
  o.rank_binary = FAKE_RANK_BINARY;
  o.server = "127.0.0.1:1";
  o.cache_dir = dir_.File("cache");
  o.work_root = dir_.File("work");
  o.gpu_ids = {3, 1};
  Collector c;
  RankLauncher launcher(o, [&c](v1::WorkerMessage m) { c.Add(std::move(m)); });
  const std::map<std::string, std::string> sleep = {{"fake.mode", "sleep"}};
  ASSERT_TRUE(launcher.Launch(Assign("job-g0", 0, sleep)).ok());
  ASSERT_TRUE(launcher.Launch(Assign("job-g1", 0, sleep)).ok());
  EXPECT_EQ(launcher.gpus_in_use(), (std::vector<int>{1, 3}));
  ASSERT_TRUE(c.WaitCount("job-g0", 2, absl::Seconds(10)));  // STARTING, then RUNNING
  ASSERT_TRUE(c.WaitCount("job-g1", 2, absl::Seconds(10)));
  const std::string args0 = ReadFile(WorkDir("job-g0", 0) + "/args.txt");
  const std::string args1 = ReadFile(WorkDir("job-g1", 0) + "/args.txt");
  EXPECT_NE(args0.find("\n--device=cuda:3\n"), std::string::npos) << args0;
  EXPECT_NE(args1.find("\n--device=cuda:1\n"), std::string::npos) << args1;
  EXPECT_EQ(args0.find("--device=cpu"), std::string::npos) << args0;

  // No slot limit here: the GPUs are the limit.
  const absl::Status third = launcher.Launch(Assign("job-g2", 0, sleep));
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted) << third;
  EXPECT_EQ(third.message(),
            "all 2 GPU(s) of this worker are in use; rank 0 of job-g2 was not started");
  EXPECT_EQ(launcher.live_ranks(), 2);

  // GPU 3 is free once its rank is reaped (before its exit is reported) and goes to the next rank.
  EXPECT_EQ(launcher.Cancel("job-g0"), 1);
  ASSERT_TRUE(c.WaitExited("job-g0", 0, absl::Seconds(10)).has_value());
  EXPECT_EQ(launcher.gpus_in_use(), (std::vector<int>{1}));
  ASSERT_TRUE(launcher.Launch(Assign("job-g2", 0, sleep)).ok());
  ASSERT_TRUE(c.WaitCount("job-g2", 2, absl::Seconds(10)));
  const std::string args2 = ReadFile(WorkDir("job-g2", 0) + "/args.txt");
  EXPECT_NE(args2.find("\n--device=cuda:3\n"), std::string::npos) << args2;
  EXPECT_EQ(launcher.gpus_in_use(), (std::vector<int>{1, 3}));
  launcher.StopAll();
  EXPECT_TRUE(launcher.gpus_in_use().empty());

  // A launch that fails before its rank starts (its work dir cannot be made) keeps no GPU.
  std::ofstream(dir_.File("not-a-dir")) << "x";
  RankLauncherOptions blocked = o;
  blocked.work_root = dir_.File("not-a-dir");
  blocked.gpu_ids = {0};
  RankLauncher failing(blocked, [&c](v1::WorkerMessage m) { c.Add(std::move(m)); });
  EXPECT_EQ(failing.Launch(Assign("job-g3", 0)).code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(failing.gpus_in_use().empty());
  EXPECT_EQ(failing.Launch(Assign("job-g3", 0)).code(), absl::StatusCode::kInternal)
      << "the GPU came back: the second launch fails the same way, not for want of a GPU";
}

}  // namespace
}  // namespace gantry::agent
