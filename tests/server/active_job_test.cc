// ActiveJob's lifecycle (JobPhase) as a pure state machine: which transitions each phase allows, and
// what a refused one leaves. The coordinator's classes drive these under the coordinator's mutex;
// the real-server tests (restarts, cancellations, server restarts) exercise them end to end.
#include <gtest/gtest.h>

#include "server/coordinator/coordinator_state.h"

namespace gantry::server {
namespace {

ActiveJob RunningJob() {
  ActiveJob job;
  job.id = "job-1";
  job.attempt = 0;
  job.rank_workers = {"w1", "w2"};
  job.ranks[0].phase = gantry::v1::RANK_PHASE_RUNNING;
  job.ranks[1].phase = gantry::v1::RANK_PHASE_RUNNING;
  job.latest_step = 40;
  job.step_seconds = {0.5, 0.6};
  return job;
}

TEST(ActiveJobTest, AFailureIsClaimedOncePerAttemptAndAReleasedClaimCanBeTakenAgain) {
  ActiveJob job = RunningJob();
  EXPECT_TRUE(job.ClaimFailure());
  EXPECT_EQ(job.phase, JobPhase::kRestarting) << JobPhaseName(job.phase);
  EXPECT_FALSE(job.ClaimFailure()) << "a second failure of the same attempt is not handled";
  job.ReleaseClaim();
  EXPECT_EQ(job.phase, JobPhase::kRunning) << JobPhaseName(job.phase);
  EXPECT_TRUE(job.ClaimFailure());
}

TEST(ActiveJobTest, AStoredRestartQueuesTheNextAttemptWithNothingOfTheLastOne) {
  ActiveJob job = RunningJob();
  ASSERT_TRUE(job.ClaimFailure());
  EXPECT_TRUE(job.Requeue(1)) << "the caller queues it with the scheduler";
  EXPECT_EQ(job.phase, JobPhase::kQueued) << JobPhaseName(job.phase);
  EXPECT_TRUE(job.Queued());
  EXPECT_FALSE(job.Stopping());
  EXPECT_EQ(job.attempt, 1);
  EXPECT_TRUE(job.ranks.empty());
  EXPECT_TRUE(job.rank_workers.empty());
  EXPECT_FALSE(job.leased);
  EXPECT_EQ(job.latest_step, -1);
  EXPECT_TRUE(job.step_seconds.empty());
  EXPECT_FALSE(job.ClaimFailure()) << "a queued attempt has no rank that could fail";
  EXPECT_TRUE(job.PlaceAgain());
  EXPECT_EQ(job.phase, JobPhase::kRunning) << JobPhaseName(job.phase);
  EXPECT_FALSE(job.PlaceAgain()) << "only a queued job is placed again";
}

TEST(ActiveJobTest, ACancellationWhileQueuedWaitsForNoRank) {
  ActiveJob job = RunningJob();
  ASSERT_TRUE(job.ClaimFailure());
  ASSERT_TRUE(job.Requeue(1));
  EXPECT_TRUE(job.Cancel());
  EXPECT_EQ(job.phase, JobPhase::kCancellingQueued) << JobPhaseName(job.phase);
  EXPECT_TRUE(job.Queued());
  EXPECT_TRUE(job.Stopping());
  EXPECT_FALSE(job.Cancel()) << "the cancellation is sent once";
  EXPECT_FALSE(job.PlaceAgain()) << "a cancelled job is never placed";
  EXPECT_TRUE(job.End());
  EXPECT_EQ(job.phase, JobPhase::kEndedQueued) << JobPhaseName(job.phase);
  EXPECT_TRUE(job.Ended());
  EXPECT_FALSE(job.End());
}

TEST(ActiveJobTest, ACancellationDuringARestartIsKeptAndTheRestartQueuesNothing) {
  ActiveJob job = RunningJob();
  ASSERT_TRUE(job.ClaimFailure());
  EXPECT_TRUE(job.Cancel());
  EXPECT_EQ(job.phase, JobPhase::kCancelling) << JobPhaseName(job.phase);
  EXPECT_FALSE(job.Queued()) << "its ranks are still stopping";
  job.ReleaseClaim();
  EXPECT_EQ(job.phase, JobPhase::kCancelling) << "releasing the claim does not undo a cancellation";
  EXPECT_FALSE(job.Requeue(1)) << "a restart stored before the cancellation queues nothing";
  EXPECT_EQ(job.phase, JobPhase::kCancellingQueued) << JobPhaseName(job.phase);
  EXPECT_EQ(job.attempt, 1);
  EXPECT_TRUE(job.ranks.empty());
}

TEST(ActiveJobTest, AnEndStoredDuringARestartStaysEndedAndNothingIsQueued) {
  ActiveJob job = RunningJob();
  ASSERT_TRUE(job.ClaimFailure());
  EXPECT_TRUE(job.End());
  EXPECT_EQ(job.phase, JobPhase::kEnded) << JobPhaseName(job.phase);
  job.ReleaseClaim();
  EXPECT_TRUE(job.Ended());
  EXPECT_FALSE(job.Requeue(1));
  EXPECT_EQ(job.phase, JobPhase::kEndedQueued) << JobPhaseName(job.phase);
  EXPECT_FALSE(job.Cancel()) << "an ended job is not cancelled";
  EXPECT_FALSE(job.ClaimFailure());
}

TEST(ActiveJobTest, ARunningJobCancelledThenEndedWaitsForItsRanks) {
  ActiveJob job = RunningJob();
  EXPECT_TRUE(job.Cancel());
  EXPECT_EQ(job.phase, JobPhase::kCancelling) << JobPhaseName(job.phase);
  EXPECT_FALSE(job.ClaimFailure()) << "a rank that exits because it was cancelled is no failure";
  EXPECT_TRUE(job.End());
  EXPECT_EQ(job.phase, JobPhase::kEnded) << JobPhaseName(job.phase);
  EXPECT_FALSE(job.Queued()) << "its ranks are still exiting";
  EXPECT_EQ(job.CountRanks(gantry::v1::RANK_PHASE_RUNNING), 2);
}

}  // namespace
}  // namespace gantry::server
