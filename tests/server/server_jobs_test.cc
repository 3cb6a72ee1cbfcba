// The job lifecycle as the server drives it, against the real gantry-server and PostgreSQL. The
// workers here are test drivers speaking the WorkerService protocol directly (register, control
// stream, rank status, progress, checkpoint upload, result), so every server decision (placement,
// state transitions, registration, cancellation, lost workers, adoption after a restart) is
// checked without training anything. tests/e2e runs the same flow with real gantry-worker daemons.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"
#include "tests/server/driver_worker.h"
#include "tests/server/server_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

class ServerJobsTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    Start();
    token_ = NewTenant("physics");
  }
  void Start() { StartServer(WorkerProtocolArgs(join_)); }

  std::unique_ptr<DriverWorker> Worker(const std::string& name, int slots = 1,
                                       std::vector<std::string> running = {},
                                       const std::string& previous_credential = "",
                                       const std::map<std::string, std::string>& labels = {}) {
    auto w = std::make_unique<DriverWorker>(channel_, join_, name, slots, std::move(running),
                                            DriverServing{}, 0, previous_credential, labels);
    EXPECT_TRUE(w->status().ok()) << Describe(w->status());
    return w;
  }

  v1::Job Submit(int world_size, int priority = 0) {
    v1::JobSpec spec = GoodSpec();
    spec.set_world_size(world_size);
    spec.set_priority(priority);
    spec.set_model_name("driven");
    return SubmitJob(token_, spec);
  }

  v1::Job Get(const std::string& id) { return GetJob(token_, id); }
  // Waits up to 6 s for the queued job's message to contain `text` (refreshed every 2 s).
  v1::Job WaitForMessage(const std::string& id, const std::string& text) {
    const auto until = steady_clock::now() + milliseconds(6000);
    v1::Job job = Get(id);
    while (job.message().find(text) == std::string::npos && steady_clock::now() < until) {
      std::this_thread::sleep_for(milliseconds(100));
      job = Get(id);
    }
    return job;
  }
  v1::Job WaitFor(const std::string& id, v1::JobState state, int timeout_ms = 10000) {
    return WaitForJob(token_, id, state, timeout_ms);
  }

  // Uploads `bytes` as a checkpoint of `job`; returns its sha256.
  std::string Upload(const DriverWorker& worker, const std::string& job, const std::string& bytes) {
    return UploadCheckpoint(channel_, worker.credential(), job, bytes);
  }

  // Places a world-size-2 job on two fresh one-slot workers and brings it to RUNNING.
  struct Running {
    v1::Job job;
    std::unique_ptr<DriverWorker> w0, w1;  // hosting rank 0 and rank 1
  };
  Running StartRunningJob() {
    Running r;
    auto a = Worker("alpha");
    auto b = Worker("beta");
    r.job = Submit(2);
    std::optional<v1::ServerMessage> ma = a->Next(), mb = b->Next();
    EXPECT_TRUE(ma && ma->has_assignment() && mb && mb->has_assignment());
    if (!ma || !mb) return r;
    const v1::Assignment& x = ma->assignment();
    const v1::Assignment& y = mb->assignment();
    EXPECT_EQ(x.job_id(), r.job.id());
    EXPECT_EQ(x.rank() + y.rank(), 1);
    EXPECT_EQ(x.world_size(), 2);
    EXPECT_EQ(x.rendezvous_host(), "127.0.0.1");
    EXPECT_EQ(x.rendezvous_port(), y.rendezvous_port());
    EXPECT_GE(x.rendezvous_port(), 30100);
    EXPECT_EQ(x.threads(), 1);
    EXPECT_EQ(x.owner(), "physics");
    EXPECT_EQ(Get(r.job.id()).state(), v1::JOB_STATE_PLACING);
    if (x.rank() == 0) {
      r.w0 = std::move(a), r.w1 = std::move(b);
    } else {
      r.w0 = std::move(b), r.w1 = std::move(a);
    }
    r.w0->set_free_slots(0);
    r.w1->set_free_slots(0);
    r.w0->RankStatus(r.job.id(), 0, v1::RANK_PHASE_RUNNING);
    EXPECT_EQ(Get(r.job.id()).state(), v1::JOB_STATE_PLACING) << "one rank is not a running job";
    r.w1->RankStatus(r.job.id(), 1, v1::RANK_PHASE_RUNNING);
    EXPECT_EQ(WaitFor(r.job.id(), v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
    return r;
  }

  std::string join_ = "server-jobs-join-token-0123456789";
  std::string token_;
};

TEST_F(ServerJobsTest, APlacedJobRunsReportsProgressAndRegistersItsModel) {
  Running r = StartRunningJob();
  ASSERT_NE(r.w0, nullptr);
  const std::string id = r.job.id();

  v1::WorkerMessage progress;
  progress.mutable_progress()->set_epoch(1);
  progress.mutable_progress()->set_epochs(2);
  progress.mutable_progress()->set_step(3);
  (*progress.mutable_progress()->mutable_losses())["d_loss"] = 0.7;
  r.w0->Send(id, progress);
  v1::WorkerMessage log;
  log.mutable_log()->set_rank(0);
  log.mutable_log()->set_level("INFO");
  log.mutable_log()->set_text("epoch 1 done");
  r.w0->Send(id, log);

  const std::string sha = Upload(*r.w0, id, std::string(5000, 'c'));
  v1::WorkerMessage result;
  v1::JobResult* res = result.mutable_result();
  res->set_success(true);
  res->set_checkpoint_sha256(sha);
  res->set_checkpoint_size_bytes(5000);
  (*res->mutable_metrics())["fom"] = 0.25;
  (*res->mutable_metrics())["eprof"] = 0.1;
  res->set_dataset_sha256(std::string(64, 'd'));
  res->set_code_version("0.4.0 test");
  (*res->mutable_hyper_parameters())["learning_rate"] = "0.002";
  res->mutable_energy_range_gev()->set_min(10);
  res->mutable_energy_range_gev()->set_max(100);
  res->set_particle(v1::PARTICLE_ELECTRON);
  v1::Histogram* h = res->add_histograms();
  h->set_name("longitudinal_profile");
  h->add_reference(1.0);
  h->add_generated(0.9);
  r.w0->Send(id, result);

  v1::Job job = WaitFor(id, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString();
  EXPECT_EQ(job.model_ref(), "driven:1");
  EXPECT_EQ(job.progress().step(), 3);
  EXPECT_EQ(job.reason(), "Succeeded");

  v1::GetModelRequest get;
  get.set_model("driven:1");
  v1::ModelVersion model;
  ASSERT_TRUE(catalog_->GetModel(Ctx(token_).get(), get, &model).ok());
  EXPECT_EQ(model.checkpoint_sha256(), sha);
  EXPECT_DOUBLE_EQ(model.metrics().at("fom"), 0.25);
  EXPECT_EQ(model.lineage().job_id(), id);
  EXPECT_EQ(model.lineage().world_size(), 2);
  EXPECT_EQ(model.lineage().code_version(), "0.4.0 test");
  EXPECT_EQ(model.lineage().dataset(), GoodSpec().dataset());
  EXPECT_EQ(model.lineage().hyper_parameters().at("epochs"), "2");
  EXPECT_EQ(model.lineage().hyper_parameters().at("learning_rate"), "0.002")
      << "the rank's resolved value wins over the spec's";
  EXPECT_EQ(model.histograms_size(), 1);
  EXPECT_EQ(model.particle(), v1::PARTICLE_ELECTRON);
  EXPECT_EQ(model.tags().at("team"), "calo");

  // The events tell the story in order, and the log line is among them.
  v1::GetJobLogsRequest logs;
  logs.set_job_id(id);
  logs.set_rank(-1);
  v1::GetJobLogsResponse lines;
  ASSERT_TRUE(training_->GetJobLogs(Ctx(token_).get(), logs, &lines).ok());
  bool found = false;
  for (const auto& l : lines.lines()) found |= l.text() == "epoch 1 done";
  EXPECT_TRUE(found);

  // The ranks exit; their slots take the next job.
  r.w0->RankStatus(id, 0, v1::RANK_PHASE_EXITED);
  r.w1->RankStatus(id, 1, v1::RANK_PHASE_EXITED);
  r.w0->set_free_slots(1);
  r.w1->set_free_slots(1);
  v1::Job next = Submit(2);
  auto m = r.w0->Next();
  ASSERT_TRUE(m && m->has_assignment());
  EXPECT_EQ(m->assignment().job_id(), next.id());
}

TEST_F(ServerJobsTest, AFailedRankFailsTheJobAndStopsTheOthers) {
  Running r = StartRunningJob();
  ASSERT_NE(r.w0, nullptr);
  r.w1->RankStatus(r.job.id(), 1, v1::RANK_PHASE_EXITED, 3);
  v1::Job job = WaitFor(r.job.id(), v1::JOB_STATE_FAILED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.reason(), "DatasetError") << "exit code 3 is a permanent dataset failure";
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_NE(job.message().find("exited with code 3 (DatasetError, permanent): boom"),
            std::string::npos)
      << job.message();
  EXPECT_NE(job.message().find("rank 1"), std::string::npos) << job.message();
  auto m = r.w0->Next();
  ASSERT_TRUE(m && m->has_cancellation());
  EXPECT_EQ(m->cancellation().job_id(), r.job.id());
}

TEST_F(ServerJobsTest, CancellingARunningJobStopsItsRanksThenEndsCancelled) {
  Running r = StartRunningJob();
  ASSERT_NE(r.w0, nullptr);
  v1::CancelJobRequest cancel;
  cancel.set_job_id(r.job.id());
  v1::Job cancelling;
  ASSERT_TRUE(training_->CancelJob(Ctx(token_).get(), cancel, &cancelling).ok());
  EXPECT_EQ(cancelling.state(), v1::JOB_STATE_CANCELLING);
  auto m0 = r.w0->Next(), m1 = r.w1->Next();
  ASSERT_TRUE(m0 && m0->has_cancellation() && m1 && m1->has_cancellation());
  EXPECT_EQ(Get(r.job.id()).state(), v1::JOB_STATE_CANCELLING) << "ranks have not stopped yet";
  r.w0->RankStatus(r.job.id(), 0, v1::RANK_PHASE_EXITED, -15);
  r.w1->RankStatus(r.job.id(), 1, v1::RANK_PHASE_EXITED, 143);
  v1::Job job = WaitFor(r.job.id(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED) << job.DebugString();
  EXPECT_EQ(job.reason(), "Cancelled");
}

TEST_F(ServerJobsTest, ASilentWorkerIsLostAndItsJobFails) {
  Running r = StartRunningJob();
  ASSERT_NE(r.w0, nullptr);
  r.w1->set_beating(false);  // the stream stays open, the heartbeats stop
  v1::Job job = WaitFor(r.job.id(), v1::JOB_STATE_FAILED, 8000);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED) << job.DebugString();
  EXPECT_EQ(job.reason(), "WorkerLost");
  EXPECT_NE(job.message().find(r.w1->name()), std::string::npos) << job.message();
  auto m = r.w0->Next();
  ASSERT_TRUE(m && m->has_cancellation());
}

TEST_F(ServerJobsTest, GangsAreWholeAndHigherPriorityGoesFirst) {
  // All three queued before any slot exists: a placement pass between two submissions (slow ones,
  // under the sanitizers) would otherwise place `low` before `high` was submitted.
  v1::Job three = Submit(3, 50);  // can never fit on two one-slot workers
  v1::Job low = Submit(2, 0);
  v1::Job high = Submit(2, 10);
  auto a = Worker("alpha");
  auto b = Worker("beta");
  auto m = a->Next();
  ASSERT_TRUE(m && m->has_assignment());
  EXPECT_EQ(m->assignment().job_id(), high.id()) << "priority 10 before priority 0";
  m = b->Next();
  ASSERT_TRUE(m && m->has_assignment());
  EXPECT_EQ(m->assignment().job_id(), high.id());
  EXPECT_EQ(Get(three.id()).state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(Get(low.id()).state(), v1::JOB_STATE_QUEUED);
  EXPECT_FALSE(a->Next(1000).has_value()) << "no slot is double-booked";
  // Queued jobs say why they wait, as the scheduler sees it (refreshed every 2 s; the first
  // message may date from before the second worker joined).
  const v1::Job waiting = WaitForMessage(three.id(), "needs 3 slots");
  EXPECT_NE(waiting.message().find("needs 3 slots"), std::string::npos) << waiting.message();
  const v1::Job behind = WaitForMessage(low.id(), "waiting for 2 free slots");
  EXPECT_NE(behind.message().find("waiting for 2 free slots"), std::string::npos)
      << behind.message();
}

TEST_F(ServerJobsTest, AfterAServerRestartRunningJobsAreAdoptedOrEndLost) {
  Running r = StartRunningJob();
  ASSERT_NE(r.w0, nullptr);
  const std::string adopted = r.job.id();
  r.w0->Close();
  r.w1->Close();
  ASSERT_EQ(StopServer(), 0);
  // A second job that runs nowhere: nobody claims it after the restart.
  Start();
  // The same daemons reconnect, showing their credentials (the server may still see them live).
  auto w0 = Worker(r.w0->name(), 1, {adopted}, r.w0->credential());
  auto w1 = Worker(r.w1->name(), 1, {adopted}, r.w1->credential());
  w0->set_free_slots(0);
  w1->set_free_slots(0);
  const std::string sha = Upload(*w0, adopted, "weights");
  v1::WorkerMessage result;
  result.mutable_result()->set_success(true);
  result.mutable_result()->set_checkpoint_sha256(sha);
  result.mutable_result()->set_checkpoint_size_bytes(7);
  w0->Send(adopted, result);
  v1::Job job = WaitFor(adopted, v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString();
  EXPECT_EQ(job.model_ref(), "driven:1");
}

TEST_F(ServerJobsTest, AJobNoWorkerClaimsAfterARestartFailsAsWorkerLost) {
  Running r = StartRunningJob();
  ASSERT_NE(r.w0, nullptr);
  r.w0->Close();
  r.w1->Close();
  ASSERT_EQ(StopServer(), 0);
  Start();
  auto w = Worker("gamma", 1, {"job-00000000-0000-0000-0000-000000000000"});
  // A job the server does not run is cancelled on the worker at once.
  auto m = w->Next();
  ASSERT_TRUE(m && m->has_cancellation());
  v1::Job job = WaitFor(r.job.id(), v1::JOB_STATE_FAILED, 8000);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.reason(), "WorkerLost") << "max_restarts 0: a lost job fails";
  EXPECT_NE(job.message().find("after the server restarted"), std::string::npos) << job.message();
}

}  // namespace
}  // namespace gantry::testing

namespace gantry::testing {
namespace {

TEST_F(ServerJobsTest, ASlotQuotaMakesAJobWaitUntilTheTenantsOtherJobEnds) {
  v1::CreatePoolRequest create;
  create.set_name("hpc");
  create.mutable_spec()->set_price_per_device_hour(0.1);
  v1::Pool pool;
  grpc::Status s = admin_->CreatePool(Ctx(admin_token_).get(), create, &pool);
  ASSERT_TRUE(s.ok()) << Describe(s);

  v1::SetTenantLimitsRequest limits;
  limits.set_tenant("physics");
  (*limits.mutable_overrides()->mutable_max_slots_per_pool())["hbc"] = 3;
  v1::TenantLimitsInfo info;
  s = admin_->SetTenantLimits(Ctx(admin_token_).get(), limits, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("no pool is named \"hbc\"; defined pools: hpc"),
            std::string::npos)
      << s.error_message();
  limits.mutable_overrides()->clear_max_slots_per_pool();
  limits.mutable_overrides()->set_fair_share_weight(-1);
  s = admin_->SetTenantLimits(Ctx(admin_token_).get(), limits, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("fair_share_weight: -1 is not a weight"), std::string::npos)
      << s.error_message();
  limits.mutable_overrides()->set_fair_share_weight(2);
  (*limits.mutable_overrides()->mutable_max_slots_per_pool())["hpc"] = 3;
  s = admin_->SetTenantLimits(Ctx(admin_token_).get(), limits, &info);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(info.effective().fair_share_weight(), 2);
  EXPECT_EQ(info.effective().max_slots_per_pool().at("hpc"), 3);
  // The placement loop reads the tenants' policies every 2 s.
  std::this_thread::sleep_for(milliseconds(2500));

  auto w = Worker("hpc-1", 4, {}, "", {{"pool", "hpc"}});
  w->set_free_slots(4);
  w->Heartbeat();
  v1::Job first = Submit(2);
  for (int rank = 0; rank < 2; ++rank) {
    auto m = w->Next();
    ASSERT_TRUE(m && m->has_assignment()) << Get(first.id()).DebugString();
    EXPECT_EQ(m->assignment().job_id(), first.id());
  }
  v1::Job second = Submit(2);
  v1::Job waiting = WaitForMessage(
      second.id(), "waiting: tenant physics holds 2 of its 3 slots on pool hpc; this job needs 2");
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_QUEUED);
  EXPECT_NE(waiting.message().find("holds 2 of its 3 slots"), std::string::npos)
      << waiting.message();
  EXPECT_FALSE(w->Next(500).has_value()) << "two slots are free but the quota holds it back";

  v1::CancelJobRequest cancel;
  cancel.set_job_id(first.id());
  v1::Job cancelling;
  ASSERT_TRUE(training_->CancelJob(Ctx(token_).get(), cancel, &cancelling).ok());
  auto m = w->Next();
  ASSERT_TRUE(m && m->has_cancellation());
  w->RankStatus(first.id(), 0, v1::RANK_PHASE_EXITED, 143);
  w->RankStatus(first.id(), 1, v1::RANK_PHASE_EXITED, 143);
  EXPECT_EQ(WaitFor(first.id(), v1::JOB_STATE_CANCELLED).state(), v1::JOB_STATE_CANCELLED);
  m = w->Next();
  while (m && m->has_cancellation()) m = w->Next();  // one per rank or per worker
  ASSERT_TRUE(m && m->has_assignment()) << "the tenant's other job ended: it starts";
  EXPECT_EQ(m->assignment().job_id(), second.id());
}

}  // namespace
}  // namespace gantry::testing
