// The job coordinator in process, on a real database and a clock the test moves: placement, a
// rank that starts, a worker that goes silent past its lease, a placement that never starts. Each
// step is one Tick at a chosen time, so what the real-server tests wait for (leases, timeouts) is
// decided here without a sleep.
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
    coordinator_ = std::make_unique<JobCoordinator>(
        CoordinatorDeps{*jobs_, *datasets_, *models_, *studies_, *pools_, *workers_, *identities_,
                        *tenant_limits_, *costs_, *blobs_, *quotas_, *credentials_, options_,
                        file_datasets_, [this] { return now_; }});
  }

  // A worker of `slots` CPU slots, registered and connected at the current time.
  std::shared_ptr<WorkerLink> Connect(const std::string& id, int slots) {
    v1::RegisterRequest request;
    request.set_name("name-" + id);
    request.set_slots(slots);
    request.set_advertise_host("10.0.0.1");
    coordinator_->sessions().OnRegister(id, request);
    v1::Hello hello;
    hello.set_worker_id(id);
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
  void ReportRank(const std::string& worker, const v1::Assignment& a, v1::RankPhase phase) {
    v1::WorkerMessage m;
    m.set_job_id(a.job_id());
    m.set_attempt(a.attempt());
    m.mutable_rank_status()->set_rank(a.rank());
    m.mutable_rank_status()->set_phase(phase);
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

}  // namespace
}  // namespace gantry::server
