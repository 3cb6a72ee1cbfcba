// Restarts as the server drives them, against the real gantry-server and PostgreSQL with test
// drivers speaking the worker protocol (tests/server/driver_worker.h): retryable and permanent
// rank exits, max_restarts, re-placement on other workers, resumption from the latest checkpoint,
// messages and uploads of an earlier attempt, preemption notices, drains, the progress watchdog and
// a restart interrupted by a server restart. tests/e2e runs the same with real daemons and ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/failure_policy.h"
#include "gantry/v1/admin.grpc.pb.h"
#include "tests/server/driver_worker.h"
#include "tests/server/server_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

class ServerRestartTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    Start();
    token_ = NewTenant("physics");
  }
  virtual std::vector<std::string> ExtraArgs() const { return {"--hang-timeout-seconds", "600"}; }
  void Start() {
    std::vector<std::string> args = WorkerProtocolArgs(join_);
    // Expired checkpoints' blobs are garbage-collected within a second.
    for (const char* a : {"--blob-gc-interval-ms=100", "--blob-gc-grace-ms=300"}) args.push_back(a);
    for (const std::string& a : ExtraArgs()) args.push_back(a);
    StartServer(args);
  }

  std::unique_ptr<DriverWorker> Worker(const std::string& name) {
    auto w = std::make_unique<DriverWorker>(channel_, join_, name, 1);
    EXPECT_TRUE(w->status().ok()) << Describe(w->status());
    return w;
  }

  v1::Job Submit(int max_restarts) {
    v1::JobSpec spec = GoodSpec();
    spec.set_max_restarts(max_restarts);
    spec.set_model_name("restarted");
    return SubmitJob(token_, spec);
  }
  v1::Job Get(const std::string& id) { return GetJob(token_, id); }
  v1::Job WaitFor(const std::string& id, v1::JobState state, int timeout_ms = 10000) {
    return WaitForJob(token_, id, state, timeout_ms);
  }

  // Waits for assignments of `job` on both workers; returns them ordered by rank (rank 0 first)
  // with the workers swapped to match.
  std::vector<v1::Assignment> TakeAssignments(const std::string& job,
                                              std::unique_ptr<DriverWorker>& a,
                                              std::unique_ptr<DriverWorker>& b) {
    std::optional<v1::ServerMessage> ma = NextAssignment(*a), mb = NextAssignment(*b);
    EXPECT_TRUE(ma.has_value() && mb.has_value()) << "both workers get a rank";
    if (!ma || !mb) return {};
    EXPECT_EQ(ma->assignment().job_id(), job);
    EXPECT_EQ(mb->assignment().job_id(), job);
    if (ma->assignment().rank() != 0) {
      std::swap(a, b);
      return {mb->assignment(), ma->assignment()};
    }
    return {ma->assignment(), mb->assignment()};
  }
  // The next message the worker gets that is (or, with want_assignment false, is not) an
  // assignment; the others before it are skipped.
  static std::optional<v1::ServerMessage> NextOf(DriverWorker& w, bool want_assignment,
                                                 int timeout_ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < until) {
      std::optional<v1::ServerMessage> m = w.Next(100);
      if (m.has_value() && m->has_assignment() == want_assignment) return m;
    }
    return std::nullopt;
  }
  static std::optional<v1::ServerMessage> NextAssignment(DriverWorker& w, int timeout_ms = 10000) {
    return NextOf(w, true, timeout_ms);
  }
  // A cancellation or a checkpoint-and-stop.
  static std::optional<v1::ServerMessage> NextControl(DriverWorker& w, int timeout_ms = 10000) {
    return NextOf(w, false, timeout_ms);
  }

  // Both ranks of `attempt` report running; the job becomes RUNNING.
  void RunRanks(const std::string& job, DriverWorker& w0, DriverWorker& w1, int attempt) {
    w0.set_free_slots(0);
    w1.set_free_slots(0);
    w0.RankStatus(job, 0, v1::RANK_PHASE_RUNNING, 0, attempt);
    w1.RankStatus(job, 1, v1::RANK_PHASE_RUNNING, 0, attempt);
    EXPECT_EQ(WaitFor(job, v1::JOB_STATE_RUNNING).state(), v1::JOB_STATE_RUNNING);
  }

  void Progress(DriverWorker& w, const std::string& job, int64_t step, int attempt = 0) {
    v1::WorkerMessage m;
    m.set_attempt(attempt);
    m.mutable_progress()->set_epoch(1);
    m.mutable_progress()->set_epochs(2);
    m.mutable_progress()->set_step(step);
    w.Send(job, m);
  }

  // The job's restart events.
  std::vector<v1::Restart> Restarts(const std::string& job) {
    v1::WatchJobRequest request;
    request.set_job_id(job);
    auto ctx = Ctx(token_, 3000);
    auto reader = training_->WatchJob(ctx.get(), request);
    std::vector<v1::Restart> restarts;
    v1::JobEvent event;
    // The job is live, so the stream stays open: read what is recorded, then give up at the
    // deadline.
    while (reader->Read(&event)) {
      if (event.has_restart()) restarts.push_back(event.restart());
    }
    return restarts;
  }

  void Succeed(DriverWorker& w0, const std::string& job, int attempt) {
    const std::string bytes = "final weights of " + job;
    ASSERT_TRUE(UploadCheckpointAt(channel_, w0.credential(), job, bytes, 20, attempt).ok());
    const std::string sha = Sha256Hex(bytes);
    v1::WorkerMessage result;
    result.set_attempt(attempt);
    result.mutable_result()->set_success(true);
    result.mutable_result()->set_checkpoint_sha256(sha);
    result.mutable_result()->set_checkpoint_size_bytes(static_cast<int64_t>(bytes.size()));
    w0.Send(job, result);
    EXPECT_EQ(WaitFor(job, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);
  }

  std::string join_ = "server-restart-join-token-0123456789";
  std::string token_;
};

TEST_F(ServerRestartTest, ARetryableExitRestartsTheGangFromTheLatestCheckpoint) {
  auto a = Worker("alpha");
  auto b = Worker("beta");
  v1::Job job = Submit(2);
  std::vector<v1::Assignment> first = TakeAssignments(job.id(), a, b);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].attempt(), 0);
  EXPECT_TRUE(first[0].resume_checkpoint_sha256().empty());
  RunRanks(job.id(), *a, *b, 0);
  Progress(*a, job.id(), 10);
  const std::string ckpt = "weights at step 10";
  ASSERT_TRUE(UploadCheckpointAt(channel_, a->credential(), job.id(), ckpt, 10, 0).ok());
  Progress(*a, job.id(), 13);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the progress is stored

  // Rank 1 loses its peer (exit 201): RESTARTING, every rank told to stop.
  b->RankStatus(job.id(), 1, v1::RANK_PHASE_EXITED, kExitPeerLost, 0);
  v1::Job restarting = WaitFor(job.id(), v1::JOB_STATE_RESTARTING);
  ASSERT_EQ(restarting.state(), v1::JOB_STATE_RESTARTING) << restarting.DebugString();
  EXPECT_EQ(restarting.reason(), "PeerLost");
  EXPECT_EQ(restarting.restarts(), 1);
  EXPECT_EQ(restarting.attempt(), 1);
  EXPECT_EQ(restarting.latest_checkpoint().sha256(), Sha256Hex(ckpt));
  std::optional<v1::ServerMessage> stop = NextControl(*a);
  ASSERT_TRUE(stop.has_value() && stop->has_cancellation());
  EXPECT_EQ(stop->cancellation().job_id(), job.id());

  // A late message of attempt 0 changes nothing.
  a->RankStatus(job.id(), 0, v1::RANK_PHASE_EXITED, 1, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(Get(job.id()).state(), v1::JOB_STATE_RESTARTING);

  // alpha's old rank is still stopping (0 free); a new worker and beta (freed) take the gang.
  auto c = Worker("gamma");
  EXPECT_FALSE(NextAssignment(*c, 1000).has_value()) << "two slots are not free yet";
  b->set_free_slots(1);
  std::vector<v1::Assignment> second = TakeAssignments(job.id(), b, c);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].attempt(), 1);
  EXPECT_EQ(second[1].attempt(), 1);
  EXPECT_EQ(second[0].resume_checkpoint_sha256(), Sha256Hex(ckpt));
  EXPECT_EQ(second[1].resume_checkpoint_sha256(), Sha256Hex(ckpt));
  EXPECT_FALSE(NextAssignment(*a, 500).has_value()) << "alpha was not free";

  RunRanks(job.id(), *b, *c, 1);
  v1::Job resumed = Get(job.id());
  EXPECT_EQ(resumed.reason(), "Resumed");
  std::vector<v1::Restart> restarts = Restarts(job.id());
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].reason(), "PeerLost");
  EXPECT_EQ(restarts[0].attempt(), 1);
  EXPECT_TRUE(restarts[0].counted());
  EXPECT_EQ(restarts[0].resumed_from_sha256(), Sha256Hex(ckpt));
  EXPECT_EQ(restarts[0].resumed_from_step(), 10);
  EXPECT_EQ(restarts[0].redone_steps(), 3);
  Succeed(*b, job.id(), 1);
}

TEST_F(ServerRestartTest, APermanentExitFailsAtOnceWhateverMaxRestarts) {
  auto a = Worker("alpha");
  auto b = Worker("beta");
  v1::Job job = Submit(5);
  std::vector<v1::Assignment> first = TakeAssignments(job.id(), a, b);
  ASSERT_EQ(first.size(), 2u);
  RunRanks(job.id(), *a, *b, 0);
  b->RankStatus(job.id(), 1, v1::RANK_PHASE_EXITED, kExitInvalidSpec, 0);
  v1::Job failed = WaitFor(job.id(), v1::JOB_STATE_FAILED);
  ASSERT_EQ(failed.state(), v1::JOB_STATE_FAILED) << failed.DebugString();
  EXPECT_EQ(failed.reason(), "InvalidSpec");
  EXPECT_EQ(failed.restarts(), 0);
  EXPECT_EQ(failed.attempt(), 0);
}

TEST_F(ServerRestartTest, CountedRestartsStopAtMaxRestarts) {
  auto a = Worker("alpha");
  auto b = Worker("beta");
  v1::Job job = Submit(1);
  ASSERT_EQ(TakeAssignments(job.id(), a, b).size(), 2u);
  RunRanks(job.id(), *a, *b, 0);
  a->RankStatus(job.id(), 0, v1::RANK_PHASE_EXITED, -9, 0);  // killed by SIGKILL
  ASSERT_EQ(WaitFor(job.id(), v1::JOB_STATE_RESTARTING).state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(Get(job.id()).reason(), "RankFailed");
  a->set_free_slots(1);
  b->set_free_slots(1);
  std::vector<v1::Assignment> second = TakeAssignments(job.id(), a, b);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_TRUE(second[0].resume_checkpoint_sha256().empty()) << "no checkpoint: from scratch";
  RunRanks(job.id(), *a, *b, 1);
  b->RankStatus(job.id(), 1, v1::RANK_PHASE_EXITED, kExitCollectiveTimeout, 1);
  v1::Job failed = WaitFor(job.id(), v1::JOB_STATE_FAILED);
  ASSERT_EQ(failed.state(), v1::JOB_STATE_FAILED) << failed.DebugString();
  EXPECT_EQ(failed.reason(), "CollectiveTimeout");
  EXPECT_EQ(failed.restarts(), 1);
  EXPECT_NE(failed.message().find("max_restarts 1"), std::string::npos) << failed.message();
}

TEST_F(ServerRestartTest, APreemptionRestartsElsewhereWithoutCounting) {
  auto a = Worker("alpha");
  auto b = Worker("beta");
  v1::Job job = Submit(0);  // max_restarts 0: a preemption still restarts
  ASSERT_EQ(TakeAssignments(job.id(), a, b).size(), 2u);
  RunRanks(job.id(), *a, *b, 0);
  v1::WorkerMessage notice;
  notice.mutable_preempting()->set_grace_ms(25000);
  notice.mutable_preempting()->set_reason("SIGTERM");
  b->Write(notice);
  // Rank 1's worker is preempted: its rank checkpoints and exits 200; rank 0 notices its peer
  // gone first.
  ASSERT_TRUE(
      UploadCheckpointAt(channel_, a->credential(), job.id(), "preempted weights", 7, 0).ok());
  a->RankStatus(job.id(), 0, v1::RANK_PHASE_EXITED, kExitPeerLost, 0);
  b->RankStatus(job.id(), 1, v1::RANK_PHASE_EXITED, kExitPreempted, 0);
  v1::Job restarting = WaitFor(job.id(), v1::JOB_STATE_RESTARTING);
  ASSERT_EQ(restarting.state(), v1::JOB_STATE_RESTARTING) << restarting.DebugString();
  EXPECT_EQ(restarting.reason(), "Preempted");
  EXPECT_EQ(restarting.restarts(), 0);

  v1::ListWorkersResponse workers;
  ASSERT_TRUE(admin_->ListWorkers(Ctx(admin_token_).get(), {}, &workers).ok());
  for (const v1::WorkerInfo& w : workers.workers()) {
    EXPECT_EQ(w.draining(), w.name() == b->name()) << w.name();
  }
  auto c = Worker("gamma");
  a->set_free_slots(1);
  b->set_free_slots(1);
  std::vector<v1::Assignment> second = TakeAssignments(job.id(), a, c);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].resume_checkpoint_sha256(), Sha256Hex("preempted weights"));
  EXPECT_FALSE(NextAssignment(*b, 500).has_value()) << "nothing is placed on a preempted worker";
}

TEST_F(ServerRestartTest, ADrainedWorkersJobsCheckpointAndMoveUntilUndrained) {
  auto a = Worker("alpha");
  auto b = Worker("beta");
  v1::Job job = Submit(0);
  ASSERT_EQ(TakeAssignments(job.id(), a, b).size(), 2u);
  RunRanks(job.id(), *a, *b, 0);

  v1::DrainWorkerRequest drain;
  drain.set_worker(b->name());  // rank 1's worker
  v1::WorkerInfo drained;
  ASSERT_TRUE(admin_->DrainWorker(Ctx(admin_token_).get(), drain, &drained).ok());
  EXPECT_TRUE(drained.draining());
  EXPECT_NE(drained.state_message().find("1 job checkpoints"), std::string::npos)
      << drained.state_message();
  std::optional<v1::ServerMessage> stop = NextControl(*b);
  ASSERT_TRUE(stop.has_value() && stop->has_checkpoint_and_stop()) << "beta is asked to move";
  EXPECT_EQ(stop->checkpoint_and_stop().job_id(), job.id());
  EXPECT_EQ(stop->checkpoint_and_stop().attempt(), 0);
  b->RankStatus(job.id(), 1, v1::RANK_PHASE_EXITED, kExitPreempted, 0);
  v1::Job restarting = WaitFor(job.id(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(restarting.reason(), "Drained");
  EXPECT_EQ(restarting.restarts(), 0);
  a->set_free_slots(1);
  b->set_free_slots(1);
  EXPECT_FALSE(NextAssignment(*a, 1000).has_value()) << "only one undrained slot is free";

  drain.set_undrain(true);
  ASSERT_TRUE(admin_->DrainWorker(Ctx(admin_token_).get(), drain, &drained).ok());
  EXPECT_FALSE(drained.draining());
  EXPECT_EQ(TakeAssignments(job.id(), a, b).size(), 2u) << "beta takes ranks again";

  drain.set_worker("no-such-worker");
  grpc::Status unknown = admin_->DrainWorker(Ctx(admin_token_).get(), drain, &drained);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status not_admin = admin_->DrainWorker(Ctx(token_).get(), drain, &drained);
  EXPECT_EQ(not_admin.error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(ServerRestartTest, UploadsOfAnEarlierAttemptAreRefused) {
  auto a = Worker("alpha");
  auto b = Worker("beta");
  v1::Job job = Submit(1);
  ASSERT_EQ(TakeAssignments(job.id(), a, b).size(), 2u);
  RunRanks(job.id(), *a, *b, 0);
  ASSERT_TRUE(
      UploadCheckpointAt(channel_, a->credential(), job.id(), "attempt 0 weights", 5, 0).ok());
  b->RankStatus(job.id(), 1, v1::RANK_PHASE_EXITED, kExitPeerLost, 0);
  ASSERT_EQ(WaitFor(job.id(), v1::JOB_STATE_RESTARTING).state(), v1::JOB_STATE_RESTARTING);
  grpc::Status late = UploadCheckpointAt(channel_, a->credential(), job.id(), "late weights", 9, 0);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(late);
  EXPECT_NE(late.error_message().find("current attempt"), std::string::npos)
      << late.error_message();
  EXPECT_EQ(Get(job.id()).latest_checkpoint().sha256(), Sha256Hex("attempt 0 weights"));
  // Attempt 1 before it is placed: nobody's yet. Once placed, its workers upload for it.
  grpc::Status early =
      UploadCheckpointAt(channel_, a->credential(), job.id(), "attempt 1 weights", 9, 1);
  EXPECT_EQ(early.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(early);
  a->RankStatus(job.id(), 0, v1::RANK_PHASE_EXITED, 1, 0);
  a->set_free_slots(1);
  b->set_free_slots(1);
  std::vector<v1::Assignment> second = TakeAssignments(job.id(), a, b);
  ASSERT_EQ(second.size(), 2u);
  ASSERT_EQ(second[0].attempt(), 1);
  EXPECT_TRUE(
      UploadCheckpointAt(channel_, a->credential(), job.id(), "attempt 1 weights", 9, 1).ok());
  EXPECT_EQ(Get(job.id()).latest_checkpoint().step(), 9);
}

TEST_F(ServerRestartTest, ARestartUnderWayWhenTheServerStopsGoesOnAfterItsRestart) {
  auto a = Worker("alpha");
  auto b = Worker("beta");
  v1::Job job = Submit(1);
  ASSERT_EQ(TakeAssignments(job.id(), a, b).size(), 2u);
  RunRanks(job.id(), *a, *b, 0);
  b->RankStatus(job.id(), 1, v1::RANK_PHASE_EXITED, kExitPeerLost, 0);
  ASSERT_EQ(WaitFor(job.id(), v1::JOB_STATE_RESTARTING).state(), v1::JOB_STATE_RESTARTING);
  a->Close();
  b->Close();
  ASSERT_EQ(StopServer(), 0);
  Start();
  // Nobody claims it; after the lease timeout it is queued again, without another restart.
  auto c = Worker("gamma");
  auto d = Worker("delta");
  std::vector<v1::Assignment> again = TakeAssignments(job.id(), c, d);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].attempt(), 1);
  v1::Job placed = Get(job.id());
  EXPECT_EQ(placed.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(placed.restarts(), 1) << "finishing the restart is not another one";
  RunRanks(job.id(), *c, *d, 1);
  Succeed(*c, job.id(), 1);
}

TEST_F(ServerRestartTest, AWorkerAwayDuringARestartIsToldToStopItsOldRanksWhenItReturns) {
  auto a = Worker("alpha");
  auto b = Worker("beta");
  v1::Job job = Submit(2);
  ASSERT_EQ(TakeAssignments(job.id(), a, b).size(), 2u);
  RunRanks(job.id(), *a, *b, 0);
  // Rank 1's worker goes silent: its lease expires and the job restarts without it; the
  // cancellation of its old rank has nowhere to go.
  b->set_beating(false);
  ASSERT_EQ(WaitFor(job.id(), v1::JOB_STATE_RESTARTING).state(), v1::JOB_STATE_RESTARTING);
  const std::string name = b->name();
  const std::string credential = b->credential();
  b->Close();
  // It comes back (showing its credential), its old rank still running: told to stop it at once.
  auto back = std::make_unique<DriverWorker>(channel_, join_, name, 1,
                                             std::vector<std::string>{job.id()}, DriverServing{},
                                             0, credential);
  ASSERT_TRUE(back->status().ok());
  std::optional<v1::ServerMessage> stop = NextControl(*back);
  ASSERT_TRUE(stop.has_value() && stop->has_cancellation());
  EXPECT_EQ(stop->cancellation().job_id(), job.id());
  EXPECT_NE(stop->cancellation().reason().find("attempt 1"), std::string::npos)
      << stop->cancellation().reason();
}

TEST_F(ServerRestartTest, RetentionRemovesOlderCheckpointBlobsButNeverTheLatest) {
  auto a = Worker("alpha");
  auto b = Worker("beta");
  v1::JobSpec spec = GoodSpec();
  spec.mutable_checkpoint_policy()->set_keep_last(2);
  v1::Job job = SubmitJob(token_, spec);
  ASSERT_EQ(TakeAssignments(job.id(), a, b).size(), 2u);
  RunRanks(job.id(), *a, *b, 0);
  auto exists = [&](const std::string& bytes) {
    auto stub = v1::WorkerService::NewStub(channel_);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + a->credential());
    v1::FetchCheckpointRequest request;
    request.set_sha256(Sha256Hex(bytes));
    auto reader = stub->FetchCheckpoint(&ctx, request);
    v1::CheckpointChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish().ok();
  };
  for (int step = 10; step <= 40; step += 10) {
    ASSERT_TRUE(UploadCheckpointAt(channel_, a->credential(), job.id(), absl::StrCat("ckpt ", step),
                                   step, 0)
                    .ok());
  }
  EXPECT_TRUE(Eventually([&] { return !exists("ckpt 10"); })) << "ckpt 10"
                                                                 " is garbage-collected";
  EXPECT_TRUE(Eventually([&] { return !exists("ckpt 20"); })) << "ckpt 20"
                                                                 " is garbage-collected";
  EXPECT_TRUE(exists("ckpt 30"));
  EXPECT_TRUE(exists("ckpt 40"));
  EXPECT_EQ(Get(job.id()).latest_checkpoint().step(), 40);
}

TEST_F(ServerRestartTest, KeepBestAlsoKeepsTheCheckpointWithTheLowestFom) {
  auto a = Worker("alpha");
  auto b = Worker("beta");
  v1::JobSpec spec = GoodSpec();
  spec.mutable_checkpoint_policy()->set_keep_last(1);
  spec.mutable_checkpoint_policy()->set_keep_best(true);
  v1::Job job = SubmitJob(token_, spec);
  ASSERT_EQ(TakeAssignments(job.id(), a, b).size(), 2u);
  RunRanks(job.id(), *a, *b, 0);
  auto exists = [&](const std::string& bytes) {
    auto stub = v1::WorkerService::NewStub(channel_);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + a->credential());
    v1::FetchCheckpointRequest request;
    request.set_sha256(Sha256Hex(bytes));
    auto reader = stub->FetchCheckpoint(&ctx, request);
    v1::CheckpointChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish().ok();
  };
  // fom (lower is better): step 20 is the best; newer ones are worse.
  const std::vector<std::pair<int, double>> uploads = {{10, 0.8}, {20, 0.3}, {30, 0.6}, {40, 0.7}};
  for (const auto& [step, fom] : uploads) {
    ASSERT_TRUE(UploadCheckpointAt(channel_, a->credential(), job.id(), absl::StrCat("ckpt ", step),
                                   step, 0, fom)
                    .ok());
  }
  EXPECT_TRUE(Eventually([&] { return !exists("ckpt 10"); })) << "ckpt 10"
                                                                 " is garbage-collected";
  EXPECT_TRUE(exists("ckpt 20")) << "the best stays beyond keep_last";
  EXPECT_TRUE(Eventually([&] { return !exists("ckpt 30"); })) << "ckpt 30"
                                                                 " is garbage-collected";
  EXPECT_TRUE(exists("ckpt 40")) << "the latest stays";
  const v1::Job got = Get(job.id());
  EXPECT_EQ(got.latest_checkpoint().step(), 40);
  ASSERT_TRUE(got.latest_checkpoint().has_fom());
  EXPECT_DOUBLE_EQ(got.latest_checkpoint().fom(), 0.7);
  // A better one replaces the best: step 20 goes.
  ASSERT_TRUE(UploadCheckpointAt(channel_, a->credential(), job.id(), "ckpt 50", 50, 0, 0.1).ok());
  EXPECT_TRUE(Eventually([&] { return !exists("ckpt 20"); })) << "ckpt 20 is garbage-collected";
  EXPECT_TRUE(Eventually([&] { return !exists("ckpt 40"); })) << "ckpt 40 is garbage-collected";
  EXPECT_TRUE(exists("ckpt 50"));
  // A figure of merit that is not finite is refused, naming the field.
  grpc::Status nan = UploadCheckpointAt(channel_, a->credential(), job.id(), "ckpt 60", 60, 0,
                                        std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(nan.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(nan.error_message().find("header.fom"), std::string::npos) << nan.error_message();
}

// The watchdog, with a short limit.
class ServerWatchdogTest : public ServerRestartTest {
 protected:
  std::vector<std::string> ExtraArgs() const override { return {"--hang-timeout-seconds", "2"}; }
};

TEST_F(ServerWatchdogTest, AJobThatStopsMakingProgressIsRestarted) {
  auto a = Worker("alpha");
  auto b = Worker("beta");
  v1::Job job = Submit(1);
  ASSERT_EQ(TakeAssignments(job.id(), a, b).size(), 2u);
  RunRanks(job.id(), *a, *b, 0);
  // Steps keep coming for a while: no restart.
  for (int step = 1; step <= 12; ++step) {
    Progress(*a, job.id(), step);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_EQ(Get(job.id()).state(), v1::JOB_STATE_RUNNING);
  // Then nothing (a rank hangs in a collective): restarted once the limit has passed since the
  // last step, max(2 s, 20 x the 0.25 s median step) = 5 s, within a placement tick and some
  // scheduling slack (the last step was reported 0.25 s before `hung`).
  const auto hung = std::chrono::steady_clock::now();
  v1::Job restarting = WaitFor(job.id(), v1::JOB_STATE_RESTARTING, 8000);
  const double after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - hung).count();
  ASSERT_EQ(restarting.state(), v1::JOB_STATE_RESTARTING) << restarting.DebugString();
  EXPECT_EQ(restarting.reason(), "NoProgress");
  EXPECT_NE(restarting.message().find("last reported step 12"), std::string::npos)
      << restarting.message();
  EXPECT_GT(after, 4.5);
  EXPECT_LT(after, 6.5);
  std::optional<v1::ServerMessage> stop = NextControl(*a);
  ASSERT_TRUE(stop.has_value() && stop->has_cancellation());
}

}  // namespace
}  // namespace gantry::testing
