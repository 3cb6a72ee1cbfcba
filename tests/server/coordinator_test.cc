// The job coordinator in process, on a real database and a clock the test moves: placement, a
// gang, a rank that starts, a worker that goes silent past its lease, a placement that never
// starts, cancellation, restarts and their budget, a drain, and a server restart. Each step is one
// Tick or one worker message at a chosen time, so what the real-server tests wait for (leases,
// timeouts) is decided here without a sleep.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/coordinator/job_coordinator.h"
#include "storage/tenant_limits_repository.h"
#include "tests/storage/storage_fixture.h"
#include "tests/support/temp_dir.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

class CoordinatorTest : public storage::StorageFixture {
 protected:
  void SetUp() override {
    StorageFixture::SetUp();
    if (HasFatalFailure()) return;
    jobs_ = std::make_unique<storage::JobRepository>(*db_);
    datasets_ = std::make_unique<storage::DatasetRepository>(*db_);
    models_ = std::make_unique<storage::ModelRepository>(*db_);
    studies_ = std::make_unique<storage::StudyRepository>(*db_);
    pools_ = std::make_unique<storage::PoolRepository>(*db_);
    workers_ = std::make_unique<storage::WorkerRepository>(*db_);
    identities_ = std::make_unique<storage::WorkerIdentityRepository>(*db_);
    tenant_limits_ = std::make_unique<storage::TenantLimitsRepository>(*db_);
    costs_ = std::make_unique<storage::CostRepository>(*db_);
    auto blobs = storage::BlobStore::Create(dir_.path());
    ASSERT_TRUE(blobs.ok()) << blobs.status();
    blobs_ = std::move(*blobs);
    quotas_ =
        std::make_unique<TenantQuotas>(*tenant_limits_, storage::TenantLimits{}, absl::Seconds(1));
    credentials_ = std::make_unique<WorkerCredentials>(*identities_, std::string(64, 'k'));
    options_.lease_timeout_ms = 15000;
    options_.placing_timeout = absl::Minutes(2);
    StartCoordinator();
  }

  // A new coordinator on the same database (what a server restart leaves: nothing in memory).
  void StartCoordinator() {
    coordinator_.reset();
    coordinator_ = std::make_unique<JobCoordinator>(
        CoordinatorDeps{*jobs_, *datasets_, *models_, *studies_, *pools_, *workers_, *identities_,
                        *tenant_limits_, *costs_, *blobs_, *quotas_, *credentials_, options_,
                        file_datasets_, [this] { return now_; }});
  }

  // A worker of `slots` CPU slots, registered and connected at the current time; its hello lists
  // `running_jobs` (a daemon that reconnects with ranks still running).
  std::shared_ptr<WorkerLink> Connect(const std::string& id, int slots,
                                      const std::string& host = "10.0.0.1",
                                      const std::vector<std::string>& running_jobs = {}) {
    v1::RegisterRequest request;
    request.set_name("name-" + id);
    request.set_slots(slots);
    request.set_advertise_host(host);
    coordinator_->sessions().OnRegister(id, request);
    v1::Hello hello;
    hello.set_worker_id(id);
    for (const std::string& job : running_jobs) hello.add_running_jobs(job);
    return coordinator_->sessions().OnConnect(id, hello);
  }
  void Heartbeat(const std::string& id, int free_slots) {
    v1::Heartbeat beat;
    beat.set_free_slots(free_slots);
    ASSERT_TRUE(coordinator_->sessions().OnHeartbeat(id, beat).ok());
  }
  v1::Job Submit(int world_size, int max_restarts) {
    v1::JobSpec spec;
    spec.set_dataset("toymc:events=64,seed=1");
    spec.set_world_size(world_size);
    spec.set_max_restarts(max_restarts);
    auto job = jobs_->Create("alice", spec, "");
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : v1::Job{};
  }
  v1::Job Stored(const std::string& id) {
    auto job = jobs_->Get("", id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : v1::Job{};
  }
  // The next assignment queued for the worker, skipping other messages; nullopt when none.
  std::optional<v1::Assignment> NextAssignment(WorkerLink& link) {
    while (std::optional<v1::ServerMessage> m = link.Next(absl::ZeroDuration())) {
      if (m->has_assignment()) return m->assignment();
    }
    return std::nullopt;
  }
  // Every message queued for the worker.
  std::vector<v1::ServerMessage> Messages(WorkerLink& link) {
    std::vector<v1::ServerMessage> out;
    while (std::optional<v1::ServerMessage> m = link.Next(absl::ZeroDuration())) {
      out.push_back(std::move(*m));
    }
    return out;
  }
  // A job placed on `worker` (one rank) whose rank reported RUNNING.
  v1::Assignment RunOn(const std::string& worker, WorkerLink& link, const v1::Job& job) {
    Tick();
    std::optional<v1::Assignment> a = NextAssignment(link);
    EXPECT_TRUE(a.has_value()) << Stored(job.id()).DebugString();
    if (!a.has_value()) return {};
    EXPECT_EQ(a->job_id(), job.id());
    ReportRank(worker, *a, v1::RANK_PHASE_RUNNING);
    EXPECT_EQ(Stored(job.id()).state(), v1::JOB_STATE_RUNNING);
    return *a;
  }
  void ReportRank(const std::string& worker, const v1::Assignment& a, v1::RankPhase phase,
                  int exit_code = 0) {
    v1::WorkerMessage m;
    m.set_job_id(a.job_id());
    m.set_attempt(a.attempt());
    m.mutable_rank_status()->set_rank(a.rank());
    m.mutable_rank_status()->set_phase(phase);
    m.mutable_rank_status()->set_exit_code(exit_code);
    absl::Status s = coordinator_->sessions().OnWorkerMessage(worker, m);
    ASSERT_TRUE(s.ok()) << s;
  }
  void Tick() { coordinator_->Tick(now_); }
  void Advance(absl::Duration d) { now_ += d; }

  gantry::testing::TempDir dir_;
  absl::Time now_ = absl::FromUnixSeconds(1'900'000'000);
  std::unique_ptr<storage::JobRepository> jobs_;
  std::unique_ptr<storage::DatasetRepository> datasets_;
  std::unique_ptr<storage::ModelRepository> models_;
  std::unique_ptr<storage::StudyRepository> studies_;
  std::unique_ptr<storage::PoolRepository> pools_;
  std::unique_ptr<storage::WorkerRepository> workers_;
  std::unique_ptr<storage::WorkerIdentityRepository> identities_;
  std::unique_ptr<storage::TenantLimitsRepository> tenant_limits_;
  std::unique_ptr<storage::CostRepository> costs_;
  std::unique_ptr<storage::BlobStore> blobs_;
  std::unique_ptr<TenantQuotas> quotas_;
  std::unique_ptr<WorkerCredentials> credentials_;
  CoordinatorOptions options_;
  FileDatasetOptions file_datasets_;
  std::unique_ptr<JobCoordinator> coordinator_;  // last: stopped before the rest goes
};

TEST_F(CoordinatorTest, AJobIsPlacedOnTheConnectedWorkerAndRunsOnceItsRankDoes) {
  std::shared_ptr<WorkerLink> link = Connect("wrk-a", 2);
  const v1::Job job = Submit(/*world_size=*/1, /*max_restarts=*/0);
  Tick();

  EXPECT_EQ(Stored(job.id()).state(), v1::JOB_STATE_PLACING);
  std::optional<v1::Assignment> a = NextAssignment(*link);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->job_id(), job.id());
  EXPECT_EQ(a->attempt(), 0);
  EXPECT_EQ(a->world_size(), 1);
  EXPECT_EQ(a->rendezvous_host(), "10.0.0.1");
  EXPECT_FALSE(a->rank_credential().empty());
  const CoordinatorSnapshot snapshot = coordinator_->Snapshot();
  ASSERT_EQ(snapshot.workers.size(), 1u);
  EXPECT_EQ(snapshot.workers[0].leased_slots, 1);

  ReportRank("wrk-a", *a, v1::RANK_PHASE_RUNNING);
  EXPECT_EQ(Stored(job.id()).state(), v1::JOB_STATE_RUNNING);
}

TEST_F(CoordinatorTest, AWorkerSilentPastItsLeaseLosesItsRanksAndTheJobRestartsOnTheNextOne) {
  std::shared_ptr<WorkerLink> a_link = Connect("wrk-a", 1);
  const v1::Job job = Submit(/*world_size=*/1, /*max_restarts=*/1);
  Tick();
  std::optional<v1::Assignment> first = NextAssignment(*a_link);
  ASSERT_TRUE(first.has_value());
  ReportRank("wrk-a", *first, v1::RANK_PHASE_RUNNING);
  ASSERT_EQ(Stored(job.id()).state(), v1::JOB_STATE_RUNNING);

  // Still within the lease: nothing happens, whatever the wall clock says.
  Advance(absl::Seconds(14));
  Tick();
  EXPECT_EQ(Stored(job.id()).state(), v1::JOB_STATE_RUNNING);

  std::shared_ptr<WorkerLink> b_link = Connect("wrk-b", 1);
  Advance(absl::Seconds(2));  // wrk-a: 16 s silent, past its 15 s lease; wrk-b joined 2 s ago
  Tick();
  const v1::Job restarted = Stored(job.id());
  EXPECT_EQ(restarted.state(), v1::JOB_STATE_RESTARTING) << restarted.DebugString();
  EXPECT_EQ(restarted.attempt(), 1);
  EXPECT_NE(restarted.message().find("name-wrk-a"), std::string::npos) << restarted.message();

  Tick();  // placed again, on the live worker
  std::optional<v1::Assignment> second = NextAssignment(*b_link);
  ASSERT_TRUE(second.has_value()) << Stored(job.id()).DebugString();
  EXPECT_EQ(second->attempt(), 1);
  EXPECT_FALSE(NextAssignment(*a_link).has_value()) << "nothing more for the lost worker";
  ReportRank("wrk-b", *second, v1::RANK_PHASE_RUNNING);
  EXPECT_EQ(Stored(job.id()).state(), v1::JOB_STATE_RUNNING);
}

TEST_F(CoordinatorTest, APlacementWhoseRanksNeverStartTimesOutAtThePlacingTimeout) {
  std::shared_ptr<WorkerLink> link = Connect("wrk-a", 1);
  const v1::Job job = Submit(/*world_size=*/1, /*max_restarts=*/0);
  Tick();
  ASSERT_TRUE(NextAssignment(*link).has_value());

  // The worker stays alive (heartbeats) but its rank never reports RUNNING.
  for (int i = 0; i < 11; ++i) {
    Advance(absl::Seconds(10));  // 110 s in all, within the 2-minute placing timeout
    Heartbeat("wrk-a", 0);
    Tick();
  }
  EXPECT_EQ(Stored(job.id()).state(), v1::JOB_STATE_PLACING);
  Advance(absl::Seconds(11));  // 121 s
  Heartbeat("wrk-a", 0);
  Tick();
  const v1::Job ended = Stored(job.id());
  EXPECT_EQ(ended.state(), v1::JOB_STATE_FAILED) << ended.DebugString();
}

TEST_F(CoordinatorTest, AGangWaitsForAllItsSlotsAndEveryRankMeetsAtRankZerosHost) {
  std::shared_ptr<WorkerLink> a_link = Connect("wrk-a", 1, "10.0.0.1");
  const v1::Job job = Submit(/*world_size=*/2, /*max_restarts=*/0);
  Tick();
  EXPECT_EQ(Stored(job.id()).state(), v1::JOB_STATE_QUEUED) << "one slot of two";
  EXPECT_FALSE(NextAssignment(*a_link).has_value()) << "no rank of a gang starts alone";

  std::shared_ptr<WorkerLink> b_link = Connect("wrk-b", 1, "10.0.0.2");
  Tick();
  std::optional<v1::Assignment> a = NextAssignment(*a_link);
  std::optional<v1::Assignment> b = NextAssignment(*b_link);
  ASSERT_TRUE(a.has_value() && b.has_value()) << Stored(job.id()).DebugString();
  EXPECT_EQ(a->world_size(), 2);
  EXPECT_EQ(a->rank() + b->rank(), 1) << "ranks 0 and 1, one each";
  const std::string rank0_host = a->rank() == 0 ? "10.0.0.1" : "10.0.0.2";
  EXPECT_EQ(a->rendezvous_host(), rank0_host);
  EXPECT_EQ(b->rendezvous_host(), rank0_host);
  EXPECT_NE(a->rank_credential(), b->rank_credential());

  ReportRank("wrk-a", *a, v1::RANK_PHASE_RUNNING);
  EXPECT_EQ(Stored(job.id()).state(), v1::JOB_STATE_PLACING) << "one rank of two runs";
  ReportRank("wrk-b", *b, v1::RANK_PHASE_RUNNING);
  EXPECT_EQ(Stored(job.id()).state(), v1::JOB_STATE_RUNNING);
}

TEST_F(CoordinatorTest, ACancelledJobsRanksAreToldToStopAndItEndsOnceTheyExit) {
  std::shared_ptr<WorkerLink> link = Connect("wrk-a", 1);
  const v1::Job job = Submit(/*world_size=*/1, /*max_restarts=*/2);
  const v1::Assignment a = RunOn("wrk-a", *link, job);
  ASSERT_TRUE(jobs_
                  ->Transition(job.id(), {v1::JOB_STATE_RUNNING}, v1::JOB_STATE_CANCELLING,
                               "CancelRequested", "cancelled by alice")
                  .ok());
  Tick();
  std::vector<v1::ServerMessage> sent = Messages(*link);
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_TRUE(sent[0].has_cancellation()) << sent[0].DebugString();
  EXPECT_EQ(sent[0].cancellation().job_id(), job.id());
  EXPECT_EQ(Stored(job.id()).state(), v1::JOB_STATE_CANCELLING) << "its rank still runs";

  // The stopped rank's exit is the cancellation's, not a failure to restart from.
  ReportRank("wrk-a", a, v1::RANK_PHASE_EXITED, /*exit_code=*/143);
  Tick();
  const v1::Job ended = Stored(job.id());
  EXPECT_EQ(ended.state(), v1::JOB_STATE_CANCELLED) << ended.DebugString();
  EXPECT_EQ(ended.reason(), "Cancelled");
  EXPECT_EQ(ended.restarts(), 0);
  Tick();
  EXPECT_EQ(coordinator_->Snapshot().workers.at(0).leased_slots, 0) << "its slot is free again";
}

TEST_F(CoordinatorTest, RetryableFailuresRestartUntilMaxRestartsAndAPermanentOneNever) {
  std::shared_ptr<WorkerLink> link = Connect("wrk-a", 1);
  const v1::Job job = Submit(/*world_size=*/1, /*max_restarts=*/1);
  const v1::Assignment first = RunOn("wrk-a", *link, job);
  ReportRank("wrk-a", first, v1::RANK_PHASE_EXITED, /*exit_code=*/137);  // killed: retryable
  v1::Job stored = Stored(job.id());
  EXPECT_EQ(stored.state(), v1::JOB_STATE_RESTARTING) << stored.DebugString();
  EXPECT_EQ(stored.restarts(), 1);
  EXPECT_EQ(stored.attempt(), 1);

  const v1::Assignment second = RunOn("wrk-a", *link, job);
  EXPECT_EQ(second.attempt(), 1);
  // A late message of the first attempt changes nothing.
  ReportRank("wrk-a", first, v1::RANK_PHASE_EXITED, /*exit_code=*/137);
  EXPECT_EQ(Stored(job.id()).state(), v1::JOB_STATE_RUNNING);
  ReportRank("wrk-a", second, v1::RANK_PHASE_EXITED, /*exit_code=*/137);
  stored = Stored(job.id());
  EXPECT_EQ(stored.state(), v1::JOB_STATE_FAILED) << "a second restart would pass max_restarts 1";
  EXPECT_EQ(stored.restarts(), 1);

  Tick();  // the slot is released
  const v1::Job other = Submit(/*world_size=*/1, /*max_restarts=*/3);
  const v1::Assignment third = RunOn("wrk-a", *link, other);
  ReportRank("wrk-a", third, v1::RANK_PHASE_EXITED, /*exit_code=*/1);  // an error of the job
  stored = Stored(other.id());
  EXPECT_EQ(stored.state(), v1::JOB_STATE_FAILED) << stored.DebugString();
  EXPECT_EQ(stored.restarts(), 0) << "a permanent failure is never retried";
}

TEST_F(CoordinatorTest, ADrainedWorkersJobCheckpointsAndMovesWithoutCountingARestart) {
  std::shared_ptr<WorkerLink> a_link = Connect("wrk-a", 1);
  const v1::Job job = Submit(/*world_size=*/1, /*max_restarts=*/0);
  const v1::Assignment first = RunOn("wrk-a", *a_link, job);
  std::shared_ptr<WorkerLink> b_link = Connect("wrk-b", 1);

  EXPECT_EQ(coordinator_->sessions().Drain("wrk-a", true), 1);
  std::vector<v1::ServerMessage> sent = Messages(*a_link);
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_TRUE(sent[0].has_checkpoint_and_stop()) << sent[0].DebugString();
  EXPECT_EQ(sent[0].checkpoint_and_stop().job_id(), job.id());
  EXPECT_EQ(sent[0].checkpoint_and_stop().attempt(), 0);

  ReportRank("wrk-a", first, v1::RANK_PHASE_EXITED, /*exit_code=*/143);
  const v1::Job moved = Stored(job.id());
  EXPECT_EQ(moved.state(), v1::JOB_STATE_RESTARTING) << moved.DebugString();
  EXPECT_EQ(moved.reason(), "Drained");
  EXPECT_EQ(moved.restarts(), 0) << "max_restarts 0 and still restarted: a drain is not counted";
  Tick();
  std::optional<v1::Assignment> second = NextAssignment(*b_link);
  ASSERT_TRUE(second.has_value()) << Stored(job.id()).DebugString();
  EXPECT_EQ(second->attempt(), 1);
  EXPECT_FALSE(NextAssignment(*a_link).has_value()) << "nothing new on a drained worker";
}

// A server restart: the new coordinator knows only the database. The worker whose hello lists its
// running job keeps it (the ranks ran on through the outage); a job no worker claims within the
// lease fails as WorkerLost.
TEST_F(CoordinatorTest, AfterARestartAClaimedJobRunsOnAndAnUnclaimedOneFailsAsWorkerLost) {
  std::shared_ptr<WorkerLink> a_link = Connect("wrk-a", 1);
  std::shared_ptr<WorkerLink> b_link = Connect("wrk-b", 1);
  Submit(/*world_size=*/1, /*max_restarts=*/0);
  Submit(/*world_size=*/1, /*max_restarts=*/0);
  Tick();
  std::optional<v1::Assignment> on_a = NextAssignment(*a_link);
  std::optional<v1::Assignment> on_b = NextAssignment(*b_link);
  ASSERT_TRUE(on_a.has_value() && on_b.has_value());
  ReportRank("wrk-a", *on_a, v1::RANK_PHASE_RUNNING);
  ReportRank("wrk-b", *on_b, v1::RANK_PHASE_RUNNING);
  const std::string kept_id = on_a->job_id(), lost_id = on_b->job_id();
  ASSERT_EQ(Stored(kept_id).state(), v1::JOB_STATE_RUNNING);
  ASSERT_EQ(Stored(lost_id).state(), v1::JOB_STATE_RUNNING);

  StartCoordinator();
  Tick();  // the first tick: the database's active jobs wait for their workers
  a_link = Connect("wrk-a", 1, "10.0.0.1", {kept_id});
  Advance(absl::Seconds(10));
  Heartbeat("wrk-a", 0);
  Tick();
  EXPECT_EQ(Stored(lost_id).state(), v1::JOB_STATE_RUNNING) << "still within the lease";

  Advance(absl::Seconds(6));  // 16 s after the restart, past the 15 s lease
  Heartbeat("wrk-a", 0);
  Tick();
  const v1::Job failed = Stored(lost_id);
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED) << failed.DebugString();
  EXPECT_EQ(failed.reason(), "WorkerLost");
  EXPECT_EQ(Stored(kept_id).state(), v1::JOB_STATE_RUNNING);

  // The adopted job ends as usual: its rank 0 exits after its result.
  ReportRank("wrk-a", *on_a, v1::RANK_PHASE_EXITED, /*exit_code=*/1);
  EXPECT_EQ(Stored(kept_id).state(), v1::JOB_STATE_FAILED) << "the adopted job's ranks report";
}

}  // namespace
}  // namespace gantry::server
