// Fault tolerance end to end: a real gantry-server on PostgreSQL, three real gantry-worker daemons
// (one slot, one thread each) and their rank processes. Each fault below happens mid-training and
// the job still ends SUCCEEDED with a registered model: kill -9 of a daemon (the job resumes from
// its checkpoint on the idle third daemon, and its final weights are bit-identical to an
// uninterrupted run's), SIGTERM preemption (not counted against max_restarts), a SIGSTOPped rank
// (the progress watchdog restarts the job) and kill -9 of the server while the job is RESTARTING. A
// permanent failure ends FAILED without a restart.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/e2e/worker_pool_fixture.h"

namespace gantry::testing {
namespace {

using FaultToleranceE2eTest = WorkerPoolFixture;

TEST_F(FaultToleranceE2eTest, AKilledDaemonsJobResumesElsewhereWithIdenticalWeights) {
  StartWorker("w1", 31100);
  StartWorker("w2", 31130);
  WaitForFreeWorkers(2);
  // The reference: the same job, uninterrupted.
  v1::Job reference = Submit(Spec(2));
  reference = WaitForState(reference.id(), v1::JOB_STATE_SUCCEEDED, 600);
  ASSERT_EQ(reference.state(), v1::JOB_STATE_SUCCEEDED) << reference.DebugString() << Logs();
  WaitForFreeWorkers(2);

  StartWorker("w3", 31160);  // idle until the restart
  WaitForFreeWorkers(3);
  v1::Job job = Submit(Spec(2));
  job = WaitForState(job.id(), v1::JOB_STATE_RUNNING, 300);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.DebugString() << Logs();
  job = WaitForCheckpoint(job.id(), 300);
  ASSERT_FALSE(job.latest_checkpoint().sha256().empty()) << job.DebugString() << Logs();
  // kill -9 of a daemon running a rank (the kernel takes its rank with it).
  std::string victim;
  for (const std::string& w : job.assigned_workers()) {
    if (victim.empty() && workers_.count(w)) victim = w;
  }
  if (victim.empty()) victim = "w2";
  ASSERT_EQ(workers_[victim]->Signal(SIGKILL, 10000), 128 + SIGKILL);
  const auto killed = steady_clock::now();
  job = WaitForState(job.id(), v1::JOB_STATE_RESTARTING, 60);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RESTARTING) << job.DebugString() << Logs();
  job = WaitForState(job.id(), v1::JOB_STATE_RUNNING, 120);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.DebugString() << Logs();
  std::cerr << "kill -9 to RUNNING again: "
            << std::chrono::duration<double>(steady_clock::now() - killed).count() << " s\n";
  job = WaitForState(job.id(), v1::JOB_STATE_SUCCEEDED, 600);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_EQ(job.attempt(), 1);
  std::vector<v1::Restart> restarts = Restarts(job.id());
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_TRUE(restarts[0].reason() == "WorkerLost" || restarts[0].reason() == "PeerLost" ||
              restarts[0].reason() == "RankFailed")
      << restarts[0].reason();
  EXPECT_FALSE(restarts[0].resumed_from_sha256().empty()) << "resumed from a checkpoint";
  EXPECT_GT(restarts[0].resumed_from_step(), 0) << "not from zero";

  // The resumed run's final weights equal the uninterrupted run's, bit for bit.
  const std::string a = dir_.path() + "/reference.ckpt", b = dir_.path() + "/resumed.ckpt";
  FetchModelCheckpoint(reference, a);
  FetchModelCheckpoint(job, b);
  EXPECT_EQ(CheckpointDiff(a, b), 0) << "the resumed job's weights differ from the reference's";
}

TEST_F(FaultToleranceE2eTest, APreemptedDaemonCheckpointsAndTheJobMovesWithoutCounting) {
  StartWorker("w1", 31200);
  StartWorker("w2", 31230);
  WaitForFreeWorkers(2);
  v1::Job job = Submit(Spec(0));  // max_restarts 0: a preemption is not a failure
  job = WaitForState(job.id(), v1::JOB_STATE_RUNNING, 300);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.DebugString() << Logs();
  StartWorker("w3", 31260);
  WaitForFreeWorkers(1);
  // SIGTERM (a spot VM reclaim or a node drain): the daemon's rank checkpoints, then it exits.
  const std::string victim =
      job.assigned_workers_size() > 1 && workers_.count(job.assigned_workers(1))
          ? job.assigned_workers(1)
          : "w2";
  ASSERT_EQ(workers_[victim]->Signal(SIGTERM, 60000), 0) << Logs();
  job = WaitForState(job.id(), v1::JOB_STATE_SUCCEEDED, 600);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.attempt(), 1);
  std::vector<v1::Restart> restarts = Restarts(job.id());
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].reason(), "Preempted");
  EXPECT_FALSE(restarts[0].counted());
  EXPECT_FALSE(restarts[0].resumed_from_sha256().empty())
      << "the preempted rank's checkpoint is resumed from";
  EXPECT_EQ(restarts[0].redone_steps(), 0) << "a preemption checkpoint loses no step";
}

TEST_F(FaultToleranceE2eTest, AStoppedRankIsCaughtByTheWatchdogAndTheJobRestarts) {
  StartWorker("w1", 31300);
  StartWorker("w2", 31330);
  WaitForFreeWorkers(2);
  v1::JobSpec spec = Spec(2);
  spec.mutable_hyper_parameters()->set_epochs(3);
  v1::Job job = Submit(spec);
  job = WaitForState(job.id(), v1::JOB_STATE_RUNNING, 300);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.DebugString() << Logs();
  job = WaitForCheckpoint(job.id(), 300);
  // SIGSTOP one rank: its peer blocks in the next all-reduce, no step is reported any more.
  std::vector<pid_t> ranks = ChildrenOf(workers_["w2"]->pid());
  ASSERT_EQ(ranks.size(), 1u) << Logs();
  ASSERT_EQ(kill(ranks[0], SIGSTOP), 0);
  const auto stopped = steady_clock::now();
  job = WaitForState(job.id(), v1::JOB_STATE_RESTARTING, 120);
  const double caught = std::chrono::duration<double>(steady_clock::now() - stopped).count();
  ASSERT_EQ(job.state(), v1::JOB_STATE_RESTARTING) << job.DebugString() << Logs();
  EXPECT_TRUE(job.reason() == "NoProgress" || job.reason() == "CollectiveTimeout") << job.reason();
  // The limit is max(20 s, 4 x the median step time) after the last reported step, which rank 0
  // reports every few seconds.
  EXPECT_LT(caught, 60.0) << "bounded: --hang-timeout-seconds 20, --hang-step-factor 4";
  job = WaitForState(job.id(), v1::JOB_STATE_SUCCEEDED, 600);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
  EXPECT_EQ(job.restarts(), 1);
  // The stopped rank ignored SIGTERM; the daemon's SIGKILL after its kill grace took it.
  EXPECT_NE(kill(ranks[0], 0), 0) << "the stopped rank " << ranks[0] << " is still there";
}

TEST_F(FaultToleranceE2eTest, KillingTheServerWhileAJobRestartsLosesNothing) {
  StartWorker("w1", 31400);
  StartWorker("w2", 31430);
  WaitForFreeWorkers(2);
  v1::Job job = Submit(Spec(2));
  job = WaitForState(job.id(), v1::JOB_STATE_RUNNING, 300);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.DebugString() << Logs();
  job = WaitForCheckpoint(job.id(), 300);
  // w2 dies; with no third worker the job waits in RESTARTING for a second free slot.
  ASSERT_EQ(workers_["w2"]->Signal(SIGKILL, 10000), 128 + SIGKILL);
  job = WaitForState(job.id(), v1::JOB_STATE_RESTARTING, 60);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RESTARTING) << job.DebugString() << Logs();
  // kill -9 of the server mid-restart, then the same server (database, port) again.
  const std::string address = server_->address();
  server_->Kill();
  StartGantryServer(address);
  StartWorker("w2", 31430);  // the machine comes back
  job = WaitForState(job.id(), v1::JOB_STATE_SUCCEEDED, 600);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
  EXPECT_EQ(job.restarts(), 1) << "finishing the interrupted restart is not another one";
  EXPECT_FALSE(job.model_ref().empty());
}

TEST_F(FaultToleranceE2eTest, APermanentFailureEndsFailedWithoutRestarting) {
  StartWorker("w1", 31500);
  StartWorker("w2", 31530);
  WaitForFreeWorkers(2);
  v1::JobSpec spec = Spec(3);
  spec.set_dataset("file:///nonexistent/e2e-showers.h5");
  v1::Job job = Submit(spec);
  job = WaitForState(job.id(), v1::JOB_STATE_FAILED, 120);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED) << job.DebugString() << Logs();
  EXPECT_EQ(job.reason(), "DatasetError");
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.attempt(), 0);
  EXPECT_NE(job.message().find("e2e-showers.h5"), std::string::npos) << job.message();
}

}  // namespace
}  // namespace gantry::testing
