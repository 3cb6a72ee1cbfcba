// Worker identity against the real gantry-server and PostgreSQL: the join token only registers
// and takes no registered worker's name, each worker speaks with its own credential and only for
// the ranks placed on it, rank processes hold a credential for their job attempt only (it expires
// with the attempt and reads only its job's checkpoints and starting model), the key that signs
// rank credentials is a private file outside the database, and revoking a join token cuts off the
// workers it registered. The workers are test drivers speaking the WorkerService protocol by hand,
// as an attacker holding the pool's join token would.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/sha256.h"
#include "tests/server/driver_worker.h"
#include "tests/server/server_fixture.h"
#include "tests/support/files.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

class ServerIdentityTest : public ServerFixture {
 protected:
  // The fixture's server starts with these.
  std::vector<std::string> SetUpServerArgs() const override { return WorkerProtocolArgs(join_); }
  void SetUp() override {
    ServerFixture::SetUp();
    token_ = NewTenant("physics");
    stub_ = v1::WorkerService::NewStub(channel_);
  }

  std::unique_ptr<DriverWorker> Worker(const std::string& name,
                                       std::vector<std::string> running = {},
                                       const std::string& join = "") {
    auto w = std::make_unique<DriverWorker>(channel_, join.empty() ? join_ : join, name, 1,
                                            std::move(running));
    EXPECT_TRUE(w->status().ok()) << Describe(w->status());
    return w;
  }

  v1::Job Submit(int world_size, const std::string& initial_model = "", int max_restarts = 0) {
    v1::JobSpec spec = GoodSpec();
    spec.set_world_size(world_size);
    spec.set_model_name("identity");
    spec.set_initial_model(initial_model);
    spec.set_max_restarts(max_restarts);
    return SubmitJob(token_, spec);
  }
  v1::Job Get(const std::string& id) { return GetJob(token_, id); }

  // A world-size-2 job RUNNING on two fresh workers; w0 hosts rank 0. Keeps both assignments.
  // With `initial_model`, a fine-tuning job starting from that model; it may restart
  // `max_restarts` times. The workers register with `join` (default: the bootstrap join token).
  struct Running {
    v1::Job job;
    std::unique_ptr<DriverWorker> w0, w1;
    v1::Assignment a0, a1;
  };
  Running StartRunningJob(const std::string& n0, const std::string& n1,
                          const std::string& initial_model = "", int max_restarts = 0,
                          const std::string& join = "") {
    Running r;
    auto a = Worker(n0, {}, join);
    auto b = Worker(n1, {}, join);
    r.job = Submit(2, initial_model, max_restarts);
    std::optional<v1::ServerMessage> ma = a->Next(), mb = b->Next();
    EXPECT_TRUE(ma && ma->has_assignment() && mb && mb->has_assignment());
    if (!ma || !mb) return r;
    if (ma->assignment().rank() == 0) {
      r.w0 = std::move(a), r.w1 = std::move(b);
      r.a0 = ma->assignment(), r.a1 = mb->assignment();
    } else {
      r.w0 = std::move(b), r.w1 = std::move(a);
      r.a0 = mb->assignment(), r.a1 = ma->assignment();
    }
    r.w0->set_free_slots(0);
    r.w1->set_free_slots(0);
    r.w0->RankStatus(r.job.id(), 0, v1::RANK_PHASE_RUNNING);
    r.w1->RankStatus(r.job.id(), 1, v1::RANK_PHASE_RUNNING);
    EXPECT_EQ(WaitForJob(token_, r.job.id(), v1::JOB_STATE_RUNNING, 10000).state(),
              v1::JOB_STATE_RUNNING);
    return r;
  }

  grpc::Status Register(const std::string& bearer, const std::string& name,
                        const std::string& previous = "", v1::RegisterResponse* out = nullptr) {
    v1::RegisterRequest reg;
    reg.set_name(name);
    reg.set_slots(1);
    reg.set_threads_per_rank(1);
    reg.set_advertise_host("127.0.0.1");
    reg.set_previous_credential(previous);
    v1::RegisterResponse response;
    return stub_->Register(Ctx(bearer).get(), reg, out != nullptr ? out : &response);
  }

  // Fetches a checkpoint with `bearer`; the call's status.
  grpc::Status Fetch(const std::string& bearer, const std::string& sha) {
    auto ctx = Ctx(bearer);
    v1::FetchCheckpointRequest request;
    request.set_sha256(sha);
    auto reader = stub_->FetchCheckpoint(ctx.get(), request);
    v1::CheckpointChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }

  // Reads dataset `id` with `bearer`; the call's status.
  grpc::Status ReadDataset(const std::string& bearer, const std::string& id) {
    auto ctx = Ctx(bearer);
    v1::ReadDatasetRequest read;
    read.set_dataset_id(id);
    auto reader = datasets_->ReadDataset(ctx.get(), read);
    v1::DatasetChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }

  // Reports a validation point of `job` attempt `attempt` with `bearer`.
  grpc::Status Report(const std::string& bearer, const std::string& job, int attempt) {
    v1::ReportValidationRequest report;
    report.set_job_id(job);
    report.set_attempt(attempt);
    report.mutable_point()->set_step(10);
    (*report.mutable_point()->mutable_metrics())["fom"] = 0.5;
    v1::ReportValidationResponse reported;
    return stub_->ReportValidation(Ctx(bearer).get(), report, &reported);
  }

  // Opens Connect with `bearer` and a hello for `worker_id`; how the server ends it.
  grpc::Status ConnectWith(const std::string& bearer, const std::string& worker_id) {
    auto ctx = Ctx(bearer);
    auto stream = stub_->Connect(ctx.get());
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id(worker_id);
    stream->Write(hello);
    stream->WritesDone();
    v1::ServerMessage m;
    while (stream->Read(&m)) {
    }
    return stream->Finish();
  }

  // Sends rank 0's successful result for `job` from `w`.
  static void SendResult(DriverWorker& w, const std::string& job, const std::string& sha) {
    v1::WorkerMessage result;
    result.mutable_result()->set_success(true);
    result.mutable_result()->set_checkpoint_sha256(sha);
    result.mutable_result()->set_checkpoint_size_bytes(7);
    w.Send(job, result);
  }

  std::string join_ = "server-identity-join-token-0123456789";
  std::string token_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
};

TEST_F(ServerIdentityTest, ALiveWorkersNameCannotBeTakenButItsOwnerReRegisters) {
  auto alpha = Worker("alpha");
  ASSERT_EQ(alpha->credential().rfind("gwc_", 0), 0u);
  grpc::Status s = Register(join_, "alpha");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
  EXPECT_NE(s.error_message().find("in use"), std::string::npos) << s.error_message();
  // A made-up credential does not help.
  s = Register(join_, "alpha", "gwc_" + std::string(64, 'a'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
  // Another worker's credential neither.
  auto beta = Worker("beta");
  s = Register(join_, "alpha", beta->credential());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
  // The worker itself keeps its id and credential.
  v1::RegisterResponse again;
  s = Register(join_, "alpha", alpha->credential(), &again);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(again.worker_id(), alpha->id());
  EXPECT_EQ(again.worker_credential(), alpha->credential());
  // Gone (stream closed), it still owns its name while its credential is valid: the join token
  // alone, or with another worker's credential, does not take it.
  alpha->Close();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  s = Register(join_, "alpha");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  EXPECT_NE(s.error_message().find("credential is valid"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("--credential-file"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("revoke"), std::string::npos) << s.error_message();
  s = Register(join_, "alpha", beta->credential());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  // Its daemon, restarted with the credential it kept, is the same worker again.
  v1::RegisterResponse back;
  s = Register(join_, "alpha", alpha->credential(), &back);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(back.worker_id(), alpha->id());
  EXPECT_EQ(back.worker_credential(), alpha->credential());
}

TEST_F(ServerIdentityTest, TheJoinTokenOnlyRegisters) {
  auto alpha = Worker("alpha");
  grpc::Status s = ConnectWith(join_, alpha->id());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  EXPECT_NE(s.error_message().find("only by Register"), std::string::npos) << s.error_message();
  s = Fetch(join_, std::string(64, 'c'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  s = UploadCheckpointAt(channel_, join_, "job-x", "bytes", 1, 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  // A worker credential does not register, and a tenant token is no worker's.
  s = Register(alpha->credential(), "delta");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  s = ConnectWith(token_, alpha->id());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  // A worker credential opens only its own worker's stream.
  auto beta = Worker("beta");
  s = ConnectWith(beta->credential(), alpha->id());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
}

TEST_F(ServerIdentityTest, AWorkerSpeaksOnlyForRanksPlacedOnIt) {
  Running r = StartRunningJob("alpha", "beta");
  ASSERT_NE(r.w0, nullptr);
  const std::string id = r.job.id();
  // An intruder with the join token claims the job in its hello and reports for it.
  auto mallory = Worker("mallory", {id});
  mallory->RankStatus(id, 0, v1::RANK_PHASE_EXITED, 1);
  SendResult(*mallory, id, std::string(64, 'e'));
  // The worker of rank 1 speaks for rank 0.
  r.w1->RankStatus(id, 0, v1::RANK_PHASE_EXITED, 1);
  SendResult(*r.w1, id, std::string(64, 'e'));
  v1::WorkerMessage progress;
  progress.mutable_progress()->set_step(999);
  r.w1->Send(id, progress);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  const v1::Job still = Get(id);
  EXPECT_EQ(still.state(), v1::JOB_STATE_RUNNING) << still.DebugString();
  EXPECT_NE(still.progress().step(), 999);
  // Its own worker still drives it.
  const std::string sha = UploadCheckpoint(channel_, r.w0->credential(), id, "weights");
  SendResult(*r.w0, id, sha);
  EXPECT_EQ(WaitForJob(token_, id, v1::JOB_STATE_SUCCEEDED, 10000).state(),
            v1::JOB_STATE_SUCCEEDED);
}

TEST_F(ServerIdentityTest, CheckpointsMoveOnlyForJobsPlacedOnTheWorker) {
  Running r = StartRunningJob("alpha", "beta");
  ASSERT_NE(r.w0, nullptr);
  const std::string id = r.job.id();
  auto mallory = Worker("mallory");
  grpc::Status s = UploadCheckpointAt(channel_, mallory->credential(), id, "poison", 50, 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  EXPECT_NE(s.error_message().find("no ranks on this worker"), std::string::npos)
      << s.error_message();
  const std::string sha = UploadCheckpoint(channel_, r.w1->credential(), id, "good weights");
  ASSERT_EQ(sha, Sha256Hex("good weights"));
  s = Fetch(mallory->credential(), sha);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  EXPECT_TRUE(Fetch(r.w0->credential(), sha).ok());
  EXPECT_TRUE(Fetch(r.a1.rank_credential(), sha).ok());
}

TEST_F(ServerIdentityTest, UploadsAreForTheCurrentAttemptOfAJobPlacedOnTheWorkerNow) {
  Running r = StartRunningJob("alpha", "beta");
  ASSERT_NE(r.w0, nullptr);
  const std::string id = r.job.id();
  // The running attempt (0): its workers and its rank credentials upload.
  ASSERT_TRUE(UploadCheckpointAt(channel_, r.w1->credential(), id, "step 5", 5, 0).ok());
  ASSERT_TRUE(UploadCheckpointAt(channel_, r.a0.rank_credential(), id, "step 6", 6, 0).ok());
  // An attempt that has not started is nobody's to upload for.
  grpc::Status s = UploadCheckpointAt(channel_, r.w0->credential(), id, "ahead", 7, 1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  EXPECT_NE(s.error_message().find("current attempt"), std::string::npos) << s.error_message();
  // Once the job has ended: neither its workers nor its rank credentials.
  const std::string sha = UploadCheckpoint(channel_, r.w0->credential(), id, "weights");
  SendResult(*r.w0, id, sha);
  ASSERT_EQ(WaitForJob(token_, id, v1::JOB_STATE_SUCCEEDED, 10000).state(),
            v1::JOB_STATE_SUCCEEDED);
  s = UploadCheckpointAt(channel_, r.w0->credential(), id, "late", 9, 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  s = Report(r.w0->credential(), id, 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  // Its rank credentials expired with the attempt, for every call.
  s = UploadCheckpointAt(channel_, r.a1.rank_credential(), id, "late", 9, 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  EXPECT_NE(s.error_message().find("expired"), std::string::npos) << s.error_message();
  s = Report(r.a0.rank_credential(), id, 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  s = Fetch(r.a0.rank_credential(), sha);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  s = ReadDataset(r.a0.rank_credential(), "ds-00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  // The worker keeps its rights: the checkpoints of a job placed on it.
  EXPECT_TRUE(Fetch(r.w0->credential(), sha).ok());
}

TEST_F(ServerIdentityTest, ARankCredentialOfAnEarlierAttemptIsRefused) {
  Running r = StartRunningJob("alpha", "beta", "", /*max_restarts=*/1);
  ASSERT_NE(r.w0, nullptr);
  const std::string id = r.job.id();
  const std::string sha = UploadCheckpoint(channel_, r.a0.rank_credential(), id, "step 5");
  ASSERT_FALSE(sha.empty());
  // Rank 1's worker is lost: the job restarts (attempt 1); attempt 0's credentials die with it.
  r.w1->Close();
  const bool restarted = Eventually([&] { return Get(id).attempt() >= 1; }, 10000);
  ASSERT_TRUE(restarted) << Get(id).DebugString();
  grpc::Status s = Fetch(r.a0.rank_credential(), sha);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  EXPECT_NE(s.error_message().find("attempt 0"), std::string::npos) << s.error_message();
  s = UploadCheckpointAt(channel_, r.a0.rank_credential(), id, "stale", 6, 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  s = Report(r.a0.rank_credential(), id, 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  s = ReadDataset(r.a0.rank_credential(), "ds-00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
}

TEST_F(ServerIdentityTest, ARankReadsOnlyItsJobsCheckpointsAndTheModelItStartsFrom) {
  // Job A ends with a registered model.
  Running a = StartRunningJob("alpha", "beta");
  ASSERT_NE(a.w0, nullptr);
  const std::string a_sha = UploadCheckpoint(channel_, a.w0->credential(), a.job.id(), "a-bytes");
  SendResult(*a.w0, a.job.id(), a_sha);
  const v1::Job done = WaitForJob(token_, a.job.id(), v1::JOB_STATE_SUCCEEDED, 10000);
  ASSERT_FALSE(done.model_ref().empty()) << done.DebugString();
  // Job B trains from scratch; job C fine-tunes A's model.
  Running b = StartRunningJob("gamma", "delta");
  Running c = StartRunningJob("epsilon", "zeta", done.model_ref());
  ASSERT_NE(b.w0, nullptr);
  ASSERT_NE(c.w0, nullptr);
  ASSERT_EQ(c.a1.initial_checkpoint_sha256(), a_sha);
  // C's ranks fetch their starting weights; B's ranks may not read that registered model.
  EXPECT_TRUE(Fetch(c.a0.rank_credential(), a_sha).ok());
  EXPECT_TRUE(Fetch(c.a1.rank_credential(), a_sha).ok());
  grpc::Status s = Fetch(b.a0.rank_credential(), a_sha);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  EXPECT_NE(s.error_message().find("its own job's checkpoints"), std::string::npos)
      << s.error_message();
  // Nor another job's checkpoint, C's from B or B's from C.
  const std::string c_sha = UploadCheckpoint(channel_, c.a0.rank_credential(), c.job.id(), "c w");
  const std::string b_sha = UploadCheckpoint(channel_, b.a0.rank_credential(), b.job.id(), "b w");
  EXPECT_EQ(Fetch(b.a1.rank_credential(), c_sha).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Fetch(c.a1.rank_credential(), b_sha).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Fetch(c.a1.rank_credential(), c_sha).ok());
  // Workers keep serving rights: any registered model's checkpoint.
  EXPECT_TRUE(Fetch(b.w0->credential(), a_sha).ok());
}

TEST_F(ServerIdentityTest, TheRankKeyIsAPrivateFileThatOutlivesARestart) {
  Running r = StartRunningJob("alpha", "beta");
  ASSERT_NE(r.w0, nullptr);
  const std::string sha = UploadCheckpoint(channel_, r.a0.rank_credential(), r.job.id(), "w");
  ASSERT_FALSE(sha.empty());
  struct stat st;
  ASSERT_EQ(stat(RankKeyFile().c_str(), &st), 0) << RankKeyFile();
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string key = RankKey();
  ASSERT_EQ(key.size(), 64u);
  EXPECT_EQ(db_.Query("SELECT count(*) FROM server_keys"), "0\n");
  // Restarted (with a long lease, so the job waits for its workers), the server reads the same
  // key: the running ranks' credentials still work.
  r.w0.reset();
  r.w1.reset();
  ASSERT_EQ(StopServer(), 0);
  std::vector<std::string> args = WorkerProtocolArgs(join_);
  args.push_back("--lease-timeout-ms=60000");
  StartServer(args);
  stub_ = v1::WorkerService::NewStub(channel_);
  EXPECT_EQ(RankKey(), key);
  grpc::Status s = Fetch(r.a0.rank_credential(), sha);
  EXPECT_TRUE(s.ok()) << Describe(s);
}

TEST_F(ServerIdentityTest, ARevokedWorkersRankCredentialsStayRefusedAfterARestart) {
  v1::CreateTokenResponse issued;
  ASSERT_TRUE(admin_->CreateJoinToken(Ctx(admin_token_).get(), {}, &issued).ok());
  Running r = StartRunningJob("alpha", "beta", "", 0, issued.token());
  Running other = StartRunningJob("gamma", "delta");
  ASSERT_NE(r.w0, nullptr);
  ASSERT_NE(other.w0, nullptr);
  const std::string sha = UploadCheckpoint(channel_, r.a0.rank_credential(), r.job.id(), "r w");
  const std::string other_sha =
      UploadCheckpoint(channel_, other.a0.rank_credential(), other.job.id(), "other w");
  ASSERT_FALSE(sha.empty());
  ASSERT_FALSE(other_sha.empty());
  v1::RevokeJoinTokenRequest revoke;
  revoke.set_token_id(issued.token_id());
  v1::RevokeJoinTokenResponse revoked;
  ASSERT_TRUE(admin_->RevokeJoinToken(Ctx(admin_token_).get(), revoke, &revoked).ok());
  grpc::Status s = Fetch(r.a0.rank_credential(), sha);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  // A new server process remembers nothing; the database says the workers were revoked.
  r.w0.reset();
  r.w1.reset();
  other.w0.reset();
  other.w1.reset();
  ASSERT_EQ(StopServer(), 0);
  std::vector<std::string> args = WorkerProtocolArgs(join_);
  args.push_back("--lease-timeout-ms=60000");
  StartServer(args);
  stub_ = v1::WorkerService::NewStub(channel_);
  for (const v1::Assignment* a : {&r.a0, &r.a1}) {
    s = UploadCheckpointAt(channel_, a->rank_credential(), r.job.id(), "after", 9, 0);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
    EXPECT_NE(s.error_message().find("revoked"), std::string::npos) << s.error_message();
  }
  s = Fetch(r.a0.rank_credential(), sha);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  // The other token's workers' ranks go on.
  s = Fetch(other.a0.rank_credential(), other_sha);
  EXPECT_TRUE(s.ok()) << Describe(s);
}

TEST_F(ServerIdentityTest, TheServerRefusesARankKeyFileOthersCanReadOrThatHoldsNoKey) {
  const std::string shared = dir_.File("shared.key");
  std::ofstream(shared) << std::string(64, 'a') << "\n";
  chmod(shared.c_str(), 0644);
  std::vector<std::string> args = StandardArgs();
  args.push_back("--rank-key-file=" + shared);
  std::string output;
  EXPECT_EQ(ServerProcess::RunToExit(args, &output), 1) << output;
  EXPECT_NE(output.find("--rank-key-file"), std::string::npos) << output;
  EXPECT_NE(output.find("mode 0644"), std::string::npos) << output;
  EXPECT_NE(output.find("chmod 600"), std::string::npos) << output;

  const std::string malformed = dir_.File("malformed.key");
  std::ofstream(malformed) << "not-a-key\n";
  chmod(malformed.c_str(), 0600);
  args.back() = "--rank-key-file=" + malformed;
  EXPECT_EQ(ServerProcess::RunToExit(args, &output), 1) << output;
  EXPECT_NE(output.find("64 hex characters"), std::string::npos) << output;
  EXPECT_EQ(ReadFile(malformed), "not-a-key\n") << "left as it was";
}

TEST_F(ServerIdentityTest, TheRegistrarTakesOnlyACheckpointTheJobUploaded) {
  Running a = StartRunningJob("alpha", "beta");
  Running b = StartRunningJob("gamma", "delta");
  ASSERT_NE(a.w0, nullptr);
  ASSERT_NE(b.w0, nullptr);
  // Job B's checkpoint (7 bytes, as SendResult states), named as job A's model by A's worker.
  const std::string b_sha = UploadCheckpoint(channel_, b.w0->credential(), b.job.id(), "b-bytes");
  SendResult(*a.w0, a.job.id(), b_sha);
  const v1::Job failed = WaitForJob(token_, a.job.id(), v1::JOB_STATE_FAILED, 10000);
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED) << failed.DebugString();
  EXPECT_EQ(failed.reason(), "RegistrationFailed");
  EXPECT_NE(failed.message().find("not a checkpoint job"), std::string::npos) << failed.message();
  EXPECT_TRUE(failed.model_ref().empty());
  // Job B registers its own.
  SendResult(*b.w0, b.job.id(), b_sha);
  const v1::Job done = WaitForJob(token_, b.job.id(), v1::JOB_STATE_SUCCEEDED, 10000);
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.DebugString();
  EXPECT_FALSE(done.model_ref().empty());
}

TEST_F(ServerIdentityTest, ARankCredentialActsOnlyForItsJobAttempt) {
  Running a = StartRunningJob("alpha", "beta");
  Running b = StartRunningJob("gamma", "delta");
  ASSERT_NE(a.w0, nullptr);
  ASSERT_NE(b.w0, nullptr);
  const std::string rank_a = a.a0.rank_credential();
  ASSERT_EQ(rank_a.rfind("grk_", 0), 0u);
  // The ranks of one attempt share a rendezvous secret that no other job's ranks hold.
  EXPECT_EQ(a.a0.rendezvous_secret().size(), 64u);
  EXPECT_EQ(a.a0.rendezvous_secret(), a.a1.rendezvous_secret());
  EXPECT_NE(a.a0.rendezvous_secret(), b.a0.rendezvous_secret());
  EXPECT_EQ(b.a0.rendezvous_secret(), b.a1.rendezvous_secret());
  EXPECT_EQ(a.a0.spec().dataset().find("grk_"), std::string::npos);
  // Its own job and attempt: accepted.
  ASSERT_TRUE(UploadCheckpointAt(channel_, rank_a, a.job.id(), "a weights", 5, 0).ok());
  // Another job, or another attempt of its own: refused.
  grpc::Status s = UploadCheckpointAt(channel_, rank_a, b.job.id(), "b poison", 5, 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  s = UploadCheckpointAt(channel_, rank_a, a.job.id(), "a later", 9, 1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  const std::string b_sha = UploadCheckpoint(channel_, b.a0.rank_credential(), b.job.id(), "b w");
  s = Fetch(rank_a, b_sha);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  EXPECT_TRUE(Fetch(rank_a, Sha256Hex("a weights")).ok());
  // It reads no dataset but its job's.
  {
    auto ctx = Ctx(rank_a);
    v1::ReadDatasetRequest read;
    read.set_dataset_id("ds-00000000-0000-0000-0000-000000000000");
    auto reader = datasets_->ReadDataset(ctx.get(), read);
    v1::DatasetChunk chunk;
    while (reader->Read(&chunk)) {
    }
    s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  }
  // It opens no worker stream and registers nothing.
  s = ConnectWith(rank_a, a.w0->id());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  s = Register(rank_a, "epsilon");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  // Rewritten for job B (the MAC no longer matches), or tampered with: refused.
  std::string forged = rank_a;
  forged.replace(4, a.job.id().size(), b.job.id());
  s = UploadCheckpointAt(channel_, forged, b.job.id(), "b poison", 6, 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  std::string flipped = rank_a;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  s = Fetch(flipped, Sha256Hex("a weights"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
}

TEST_F(ServerIdentityTest, NoWorkerSecretIsStoredInClear) {
  // A worker with a generation secret registers, re-registers showing its credential, and runs a
  // job to its end (uploads, a result, a model).
  v1::RegisterRequest reg;
  reg.set_name("sigma");
  reg.set_slots(1);
  reg.set_threads_per_rank(1);
  reg.set_advertise_host("127.0.0.1");
  reg.set_generation_endpoint("127.0.0.1:9");
  const std::string generation_secret = "gensecret-" + std::string(40, 'q');
  reg.set_generation_secret(generation_secret);
  v1::RegisterResponse first, second;
  ASSERT_TRUE(stub_->Register(Ctx(join_).get(), reg, &first).ok());
  reg.set_previous_credential(first.worker_credential());
  ASSERT_TRUE(stub_->Register(Ctx(join_).get(), reg, &second).ok());
  ASSERT_EQ(second.worker_credential(), first.worker_credential());
  Running r = StartRunningJob("alpha", "beta");
  ASSERT_NE(r.w0, nullptr);
  const std::string sha = UploadCheckpoint(channel_, r.a0.rank_credential(), r.job.id(), "weights");
  SendResult(*r.w0, r.job.id(), sha);
  ASSERT_EQ(WaitForJob(token_, r.job.id(), v1::JOB_STATE_SUCCEEDED, 10000).state(),
            v1::JOB_STATE_SUCCEEDED);

  // Every row of every table as text (bytea as hex): none of the secrets, plain or hex-encoded.
  std::string dump;
  for (absl::string_view table : absl::StrSplit(
           db_.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                     "'public' AND table_type = 'BASE TABLE'"),
           '\n', absl::SkipEmpty())) {
    absl::StrAppend(&dump, db_.Query(absl::StrCat("SELECT t::text FROM \"", table, "\" t")), "\n");
  }
  ASSERT_NE(dump.find("sigma"), std::string::npos) << "the dump holds the worker rows";
  auto hex = [](const std::string& text) {
    std::string out;
    for (unsigned char c : text) absl::StrAppend(&out, absl::Hex(c, absl::kZeroPad2));
    return out;
  };
  for (const std::string& secret :
       {generation_secret, first.worker_credential(), r.w0->credential(), join_, token_,
        r.a0.rank_credential(), RankKey()}) {
    EXPECT_EQ(dump.find(secret), std::string::npos) << secret.substr(0, 8) << "... in clear";
    EXPECT_EQ(dump.find(hex(secret)), std::string::npos) << secret.substr(0, 8) << "... as hex";
  }
}

TEST_F(ServerIdentityTest, RevokingAJoinTokenEndsItsWorkersAndItsRegistrations) {
  v1::CreateTokenResponse issued;
  ASSERT_TRUE(admin_->CreateJoinToken(Ctx(admin_token_).get(), {}, &issued).ok());
  auto gamma = Worker("gamma", {}, issued.token());
  auto alpha = Worker("alpha");  // registered with the bootstrap token
  v1::ListJoinTokensResponse listed;
  ASSERT_TRUE(admin_->ListJoinTokens(Ctx(admin_token_).get(), {}, &listed).ok());
  ASSERT_EQ(listed.tokens_size(), 2);
  const v1::JoinTokenInfo* mine = nullptr;
  for (const auto& t : listed.tokens()) {
    if (t.token_id() == issued.token_id()) mine = &t;
    EXPECT_EQ(t.workers(), 1) << t.DebugString();
    EXPECT_FALSE(t.has_revoked_at());
  }
  ASSERT_NE(mine, nullptr);
  v1::ListJoinTokensResponse as_tenant;
  grpc::Status s = admin_->ListJoinTokens(Ctx(token_).get(), {}, &as_tenant);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);

  v1::RevokeJoinTokenRequest revoke;
  revoke.set_token_id(issued.token_id());
  v1::RevokeJoinTokenResponse revoked;
  ASSERT_TRUE(admin_->RevokeJoinToken(Ctx(admin_token_).get(), revoke, &revoked).ok());
  EXPECT_EQ(revoked.workers_revoked(), 1);
  // No new registrations with it; gamma's stream ends at its next heartbeat; its credential is
  // dead. Workers of other tokens go on.
  s = Register(issued.token(), "zeta");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  for (int waited = 0; waited < 5000 && !gamma->stream_ended(); waited += 50) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gamma->stream_ended());
  s = gamma->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  s = ConnectWith(gamma->credential(), gamma->id());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  // Its identity revoked, its name is free: a valid join token registers it again.
  s = Register(join_, "gamma", gamma->credential());
  EXPECT_TRUE(s.ok()) << "a valid join token registers it again: " << Describe(s);
  EXPECT_TRUE(Register(join_, "eta").ok());
  ASSERT_TRUE(admin_->ListJoinTokens(Ctx(admin_token_).get(), {}, &listed).ok());
  for (const auto& t : listed.tokens()) {
    if (t.token_id() == issued.token_id()) {
      EXPECT_TRUE(t.has_revoked_at());
      EXPECT_EQ(t.workers(), 0);
    }
  }
  // An unknown or malformed id.
  revoke.set_token_id("jtk-00000000-0000-0000-0000-000000000000");
  s = admin_->RevokeJoinToken(Ctx(admin_token_).get(), revoke, &revoked);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  revoke.set_token_id("tok-1");
  s = admin_->RevokeJoinToken(Ctx(admin_token_).get(), revoke, &revoked);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
}

}  // namespace
}  // namespace gantry::testing
