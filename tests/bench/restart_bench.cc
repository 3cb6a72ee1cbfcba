// Fault-tolerance figures through the whole service (a real gantry-server, PostgreSQL, three
// gantry-worker daemons and their ranks; built here, run by hand, figures in docs/BENCHMARKS.md
// "Restarts"):
// - for each checkpoint policy, kill -9 of a daemon running rank 1 at the same training step: time
//   from the kill to RESTARTING and to RUNNING again, and the training redone (the restart event);
// - the cost of checkpoints on the step: the same job without intermediate checkpoints and with one
//   every step (the snapshot is written at the step boundary, the upload runs in the background),
//   with the snapshot and upload times the ranks log.
// Run: GANTRY_TEST_DSN=... build/tests/bench/restart_bench (deploy/local/pg.sh start prints a DSN).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "tests/e2e/worker_pool_fixture.h"

namespace gantry::testing {
namespace {

class RestartBench : public WorkerPoolFixture {
 protected:
  // Waits until rank 0 reported at least `step` steps.
  v1::Job WaitForStep(const std::string& id, int64_t step, int timeout_s) {
    const auto until = steady_clock::now() + seconds(timeout_s);
    v1::Job job = Get(id);
    while (job.progress().step() < step && steady_clock::now() < until &&
           job.state() != v1::JOB_STATE_SUCCEEDED && job.state() != v1::JOB_STATE_FAILED) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      job = Get(id);
    }
    return job;
  }
  static double Since(steady_clock::time_point t) {
    return std::chrono::duration<double>(steady_clock::now() - t).count();
  }
};

TEST_F(RestartBench, RestartCostPerCheckpointPolicy) {
  StartWorker("w1", 32100);
  StartWorker("w2", 32130);
  StartWorker("w3", 32160);
  WaitForFreeWorkers(3);
  struct Policy {
    std::string name;
    int every_steps, every_epochs;
  };
  const std::vector<Policy> policies = {{"every_steps=2", 2, 0},
                                        {"every_steps=4", 4, 0},
                                        {"every_epochs=1 (8 steps)", 0, 1},
                                        {"final only", 0, 0}};
  const int64_t kill_at = 11;  // steps reported by rank 0 before the kill
  std::vector<std::string> rows;
  int port = 32200;
  for (const Policy& p : policies) {
    v1::JobSpec spec = Spec(3);
    spec.mutable_hyper_parameters()->set_epochs(3);  // 24 steps
    spec.mutable_checkpoint_policy()->set_every_steps(p.every_steps);
    spec.mutable_checkpoint_policy()->set_every_epochs(p.every_epochs);
    v1::Job job = Submit(spec);
    job = WaitForState(job.id(), v1::JOB_STATE_RUNNING, 300);
    ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << Logs();
    job = WaitForStep(job.id(), kill_at, 300);
    ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << Logs();
    // A daemon running a rank of the job (the last one found).
    std::string victim;
    for (const auto& [name, w] : workers_) {
      if (!ChildrenOf(w->pid()).empty()) victim = name;
    }
    ASSERT_FALSE(victim.empty()) << Logs();
    const auto killed = steady_clock::now();
    ASSERT_EQ(workers_[victim]->Signal(SIGKILL, 10000), 128 + SIGKILL);
    job = WaitForState(job.id(), v1::JOB_STATE_RESTARTING, 60);
    const double to_restarting = Since(killed);
    job = WaitForState(job.id(), v1::JOB_STATE_RUNNING, 300);
    const double to_running = Since(killed);
    ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << Logs();
    StartWorker(victim, port += 30);  // the machine comes back for the next round
    job = WaitForState(job.id(), v1::JOB_STATE_SUCCEEDED, 600);
    ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
    std::vector<v1::Restart> restarts = Restarts(job.id());
    ASSERT_FALSE(restarts.empty());
    const v1::Restart& r = restarts.front();
    rows.push_back(absl::StrFormat("| %s | %d | %s | %d | %d | %.1f | %.1f | %.1f |", p.name,
                                   job.progress().step(), r.reason(), r.resumed_from_step(),
                                   r.redone_steps(), r.redone_seconds(), to_restarting,
                                   to_running));
    WaitForFreeWorkers(3);
  }
  std::printf(
      "\n| checkpoint policy | steps | reason | resumed from step | steps redone | redone s | kill "
      "-> "
      "RESTARTING s | kill -> RUNNING s |\n|---|---|---|---|---|---|---|---|\n");
  for (const std::string& row : rows) std::printf("%s\n", row.c_str());
}

TEST_F(RestartBench, CheckpointCostOnTheStep) {
  StartWorker("w1", 32400);
  StartWorker("w2", 32430);
  WaitForFreeWorkers(2);
  std::vector<std::string> rows;
  for (int every : {0, 1, 0, 1}) {  // interleaved: the machine's load drifts
    v1::JobSpec spec = Spec(0);
    spec.mutable_checkpoint_policy()->set_every_steps(every);
    spec.mutable_validation()->set_disabled(true);
    v1::Job job = Submit(spec);
    job = WaitForState(job.id(), v1::JOB_STATE_SUCCEEDED, 600);
    ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
    int checkpoints = 0;
    for (const v1::JobEvent& e : Events(job.id())) checkpoints += e.has_checkpoint_saved();
    // The ranks log each snapshot's write time and each upload's time.
    double snapshot = 0, upload = 0;
    int snapshots = 0, uploads = 0;
    for (const v1::JobEvent& e : Events(job.id())) {
      if (!e.has_log()) continue;
      const std::string& text = e.log().text();
      double seconds = 0;
      size_t at = text.find("snapshot ");
      if (at != std::string::npos &&
          std::sscanf(text.c_str() + at, "snapshot %lf", &seconds) == 1) {
        snapshot += seconds;
        ++snapshots;
      }
      at = text.find("upload ");
      if (at != std::string::npos && std::sscanf(text.c_str() + at, "upload %lf", &seconds) == 1) {
        upload += seconds;
        ++uploads;
      }
    }
    const double sps = job.progress().samples_per_second();
    rows.push_back(absl::StrFormat(
        "| %s | %d | %d | %.2f | %.3f | %.3f | %.3f |", every == 0 ? "final only" : "every step",
        job.progress().step(), checkpoints, sps, sps > 0 ? 8.0 / sps : 0,
        snapshots > 0 ? snapshot / snapshots : 0, uploads > 0 ? upload / uploads : 0));
    WaitForFreeWorkers(2);
  }
  std::printf(
      "\n| checkpoints | steps | uploaded | samples/s (all ranks) | s per step (global batch 8) | "
      "mean snapshot s | mean upload s |\n|---|---|---|---|---|---|---|\n");
  for (const std::string& row : rows) std::printf("%s\n", row.c_str());
}

}  // namespace
}  // namespace gantry::testing
