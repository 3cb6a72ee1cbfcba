// Delivery of worker job messages against the real gantry-server and PostgreSQL: the server
// acknowledges (HeartbeatAck.acked_seq) what it stored, a message re-sent after a reconnect is
// acknowledged again but not applied twice, a restarted daemon (new incarnation) starts its seqs
// again, hostile seq values (0, backwards, huge) neither crash nor wedge the stream, and while
// PostgreSQL is stopped streams, leases and known workers' registrations live on in memory while
// job messages wait unacknowledged until it is back.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/server/driver_worker.h"
#include "tests/server/server_fixture.h"
#include "tests/support/private_postgres.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

class ServerDeliveryTest : public ServerFixture {
 protected:
  // The fixture's server starts with these.
  std::vector<std::string> SetUpServerArgs() const override { return WorkerProtocolArgs(join_); }
  void SetUp() override {
    ServerFixture::SetUp();
    token_ = NewTenant("physics");
  }

  std::unique_ptr<DriverWorker> Worker(uint64_t incarnation, std::vector<std::string> running = {},
                                       const std::string& name = "delta",
                                       const std::string& previous_credential = "") {
    auto w = std::make_unique<DriverWorker>(channel_, join_, name, 1, std::move(running),
                                            DriverServing{}, incarnation, previous_credential);
    EXPECT_TRUE(w->status().ok()) << Describe(w->status());
    return w;
  }

  static v1::WorkerMessage Log(const std::string& text, uint64_t seq) {
    v1::WorkerMessage m;
    m.set_seq(seq);
    m.mutable_log()->set_rank(0);
    m.mutable_log()->set_level("INFO");
    m.mutable_log()->set_text(text);
    return m;
  }

  // How often each log text is in the job's log.
  std::map<std::string, int> LogCounts(const std::string& job) {
    v1::GetJobLogsRequest request;
    request.set_job_id(job);
    request.set_rank(-1);
    v1::GetJobLogsResponse response;
    const grpc::Status s = training_->GetJobLogs(Ctx(token_).get(), request, &response);
    EXPECT_TRUE(s.ok()) << Describe(s);
    std::map<std::string, int> counts;
    for (const v1::LogLine& line : response.lines()) ++counts[line.text()];
    return counts;
  }

  std::unique_ptr<PrivatePostgres> pg_;  // outlives the server (stopped in TearDown)
  std::string join_ = "server-delivery-join-token-0123456789";
  std::string token_;
};

TEST_F(ServerDeliveryTest, AcknowledgesStoredMessagesAndAppliesResentOnesOnce) {
  auto w = Worker(42);
  v1::JobSpec spec = GoodSpec();
  spec.set_world_size(1);
  const v1::Job job = SubmitJob(token_, spec);
  std::optional<v1::ServerMessage> assigned = w->Next();
  ASSERT_TRUE(assigned.has_value() && assigned->has_assignment());
  w->set_free_slots(0);

  v1::WorkerMessage running;
  running.set_seq(1);
  running.mutable_rank_status()->set_rank(0);
  running.mutable_rank_status()->set_phase(v1::RANK_PHASE_RUNNING);
  w->Send(job.id(), running);
  w->Send(job.id(), Log("first", 2));
  w->Send(job.id(), Log("second", 3));
  ASSERT_TRUE(w->WaitAcked(3));
  EXPECT_EQ(WaitForJob(token_, job.id(), v1::JOB_STATE_RUNNING, 10000).state(),
            v1::JOB_STATE_RUNNING);

  // The daemon reconnects (same process, showing its credential): it re-sends what it has not
  // seen acknowledged.
  const std::string credential = w->credential();
  w.reset();
  auto again = Worker(42, {job.id()}, "delta", credential);
  again->set_free_slots(0);
  again->Send(job.id(), running);
  again->Send(job.id(), Log("first", 2));
  again->Send(job.id(), Log("second", 3));
  again->Send(job.id(), Log("third", 4));
  ASSERT_TRUE(again->WaitAcked(4));
  EXPECT_EQ(again->acked_seq(), 4u);
  std::map<std::string, int> counts = LogCounts(job.id());
  EXPECT_EQ(counts["first"], 1);
  EXPECT_EQ(counts["second"], 1);
  EXPECT_EQ(counts["third"], 1);

  // Hostile seqs: 0 is stored untracked, backwards is a duplicate, huge is taken as it is.
  again->Send(job.id(), Log("untracked", 0));
  again->Send(job.id(), Log("backwards", 2));
  again->Send(job.id(), Log("huge", UINT64_MAX));
  ASSERT_TRUE(again->WaitAcked(UINT64_MAX));
  again->Send(job.id(), Log("after huge", 5));
  // A message about a job this worker does not run is dropped and acknowledged all the same.
  v1::WorkerMessage stray = Log("stray", 6);
  again->Send("job-that-does-not-exist", stray);
  // Messages are stored in order: once an untracked marker sent last is in, so is all before.
  again->Send(job.id(), Log("marker", 0));
  for (int i = 0; i < 500 && LogCounts(job.id())["marker"] == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  counts = LogCounts(job.id());
  EXPECT_EQ(counts["marker"], 1);
  EXPECT_EQ(counts["untracked"], 1);
  EXPECT_EQ(counts["backwards"], 0);
  EXPECT_EQ(counts["huge"], 1);
  EXPECT_EQ(counts["after huge"], 0);
  EXPECT_EQ(again->acked_seq(), UINT64_MAX);

  // A restarted daemon (new incarnation, showing the credential it kept) numbers from 1 again:
  // nothing of it is a duplicate.
  again.reset();
  auto restarted = Worker(43, {job.id()}, "delta", credential);
  restarted->set_free_slots(0);
  restarted->Send(job.id(), Log("restarted", 1));
  ASSERT_TRUE(restarted->WaitAcked(1));
  EXPECT_EQ(restarted->acked_seq(), 1u);
  counts = LogCounts(job.id());
  EXPECT_EQ(counts["restarted"], 1);
  EXPECT_EQ(counts["first"], 1);
  EXPECT_EQ(HealthStatus(), 1);
}

TEST_F(ServerDeliveryTest, ADatabaseOutageKeepsStreamsAndLeasesAndMessagesWaitInOrder) {
  // A PostgreSQL of this test's own, stopped and started again; the shared one stays up.
  pg_ = std::make_unique<PrivatePostgres>();
  ASSERT_FALSE(pg_->dsn().empty());
  server_dsn_ = pg_->dsn();
  StartServer(WorkerProtocolArgs(join_));  // 200 ms heartbeats, 1.5 s lease
  token_ = NewTenant("physics");
  auto w = Worker(7);
  auto other = Worker(8, {}, "echo");
  v1::JobSpec spec = GoodSpec();
  spec.set_world_size(1);
  const v1::Job job = SubmitJob(token_, spec);
  std::optional<v1::ServerMessage> assigned = w->Next(3000);
  if (!assigned.has_value()) {
    // Placed on the other worker: swap roles.
    std::swap(w, other);
    assigned = w->Next();
  }
  ASSERT_TRUE(assigned.has_value() && assigned->has_assignment());
  w->set_free_slots(0);
  v1::WorkerMessage running;
  running.set_seq(1);
  running.mutable_rank_status()->set_rank(0);
  running.mutable_rank_status()->set_phase(v1::RANK_PHASE_RUNNING);
  w->Send(job.id(), running);
  ASSERT_TRUE(w->WaitAcked(1));
  ASSERT_EQ(WaitForJob(token_, job.id(), v1::JOB_STATE_RUNNING, 10000).state(),
            v1::JOB_STATE_RUNNING);

  ASSERT_TRUE(pg_->Stop());
  w->Send(job.id(), Log("during the outage", 2));
  w->Send(job.id(), Log("also during the outage", 3));
  const int64_t acks = w->acks();
  // Twice the lease: heartbeats go on being acknowledged, the messages are not.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_GT(w->acks(), acks + 5);
  EXPECT_EQ(w->acked_seq(), 1u);

  // A known worker registers and connects again from memory (showing its credential), keeping
  // its id and credential.
  const std::string other_id = other->id();
  const std::string other_name = other->name();
  const std::string other_credential = other->credential();
  other.reset();
  other = Worker(9, {}, other_name, other_credential);
  ASSERT_TRUE(other->status().ok()) << Describe(other->status());
  EXPECT_EQ(other->id(), other_id);
  EXPECT_EQ(other->credential(), other_credential);
  const int64_t other_acks = other->acks();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_GT(other->acks(), other_acks) << "the reconnected stream is not served";
  // An unknown one cannot register without the database.
  {
    v1::RegisterRequest reg;
    reg.set_name("stranger");
    reg.set_slots(1);
    reg.set_device(v1::DEVICE_KIND_CPU);
    reg.set_threads_per_rank(1);
    reg.set_advertise_host("127.0.0.1");
    v1::RegisterResponse response;
    auto ctx = Ctx(join_);
    EXPECT_EQ(worker_->Register(ctx.get(), reg, &response).error_code(), grpc::UNAVAILABLE);
  }

  ASSERT_TRUE(pg_->Start());
  ASSERT_TRUE(w->WaitAcked(3, 20000)) << server_->Stderr();
  std::map<std::string, int> counts = LogCounts(job.id());
  EXPECT_EQ(counts["during the outage"], 1);
  EXPECT_EQ(counts["also during the outage"], 1);
  // No worker was lost, so the job runs on.
  EXPECT_EQ(GetJob(token_, job.id()).state(), v1::JOB_STATE_RUNNING);
  const std::string log = server_->Stderr();
  EXPECT_NE(log.find("keeping its lease in memory"), std::string::npos) << log;
  EXPECT_NE(log.find("from memory"), std::string::npos) << log;
  // The rows are written again: both workers are listed as connected.
  bool listed = false;
  for (int i = 0; i < 50 && !listed; ++i) {
    v1::ListWorkersResponse response;
    int connected = 0;
    if (admin_->ListWorkers(Ctx(admin_token_).get(), {}, &response).ok()) {
      for (const v1::WorkerInfo& info : response.workers()) connected += info.connected();
    }
    listed = connected == 2;
    if (!listed) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(listed);
}

TEST_F(ServerDeliveryTest, ATerminalTransitionDuringADatabaseOutageIsStoredWhenItReturns) {
  pg_ = std::make_unique<PrivatePostgres>();
  ASSERT_FALSE(pg_->dsn().empty());
  server_dsn_ = pg_->dsn();
  StartServer(WorkerProtocolArgs(join_));
  token_ = NewTenant("physics");
  auto w = Worker(11);
  v1::JobSpec spec = GoodSpec();
  spec.set_world_size(1);
  const v1::Job job = SubmitJob(token_, spec);
  std::optional<v1::ServerMessage> assigned = w->Next(5000);
  ASSERT_TRUE(assigned.has_value() && assigned->has_assignment());
  w->set_free_slots(0);
  v1::WorkerMessage running;
  running.set_seq(1);
  running.mutable_rank_status()->set_rank(0);
  running.mutable_rank_status()->set_phase(v1::RANK_PHASE_RUNNING);
  w->Send(job.id(), running);
  ASSERT_TRUE(w->WaitAcked(1));
  ASSERT_EQ(WaitForJob(token_, job.id(), v1::JOB_STATE_RUNNING, 10000).state(),
            v1::JOB_STATE_RUNNING);

  // Rank 0 reports a failure while PostgreSQL is down: the job's FAILED cannot be written.
  ASSERT_TRUE(pg_->Stop());
  v1::WorkerMessage failed;
  failed.set_seq(2);
  failed.mutable_result()->set_success(false);
  failed.mutable_result()->set_message("the generator diverged");
  w->Send(job.id(), failed);
  ASSERT_TRUE(Eventually(
      [&] {
        return server_->Stderr().find("could not be written; retrying until it is stored") !=
               std::string::npos;
      },
      10000))
      << server_->Stderr();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // several retries fail meanwhile
  ASSERT_TRUE(pg_->Start());
  const v1::Job ended = WaitForJob(token_, job.id(), v1::JOB_STATE_FAILED, 20000);
  EXPECT_EQ(ended.state(), v1::JOB_STATE_FAILED) << server_->Stderr();
  EXPECT_EQ(ended.reason(), "TrainingFailed");
  // Health follows the database: SERVING again within a health-check interval (3 s).
  EXPECT_TRUE(Eventually([&] { return HealthStatus() == 1; }, 10000));
}

}  // namespace
}  // namespace gantry::testing
