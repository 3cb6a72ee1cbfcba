// Per-tenant limits against the real gantry-server and PostgreSQL: active jobs, stored dataset
// bytes, concurrent generation streams, showers per minute and long-lived calls, each
// RESOURCE_EXHAUSTED naming the limit, its value and the use; overrides through
// AdminService.SetTenantLimits. The bounded thread pools are server_capacity_test's.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/grpc_status.h"
#include "base/status_details.h"
#include "gantry/v1/admin.grpc.pb.h"
#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"
#include "tests/server/generation_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using Mode = FakeGenerationWorker::Mode;

bool Mentions(const grpc::Status& s, const std::string& text) {
  return s.error_message().find(text) != std::string::npos;
}

class ServerQuotaTest : public GenerationFixture {
 protected:
  void Restart(std::vector<std::string> extra) {
    extra.push_back("--max-showers-per-request=100000");
    RestartServer(extra);
  }

  v1::TenantLimitsInfo SetLimits(const std::string& tenant, const v1::TenantLimitValues& values) {
    v1::SetTenantLimitsRequest request;
    request.set_tenant(tenant);
    *request.mutable_overrides() = values;
    v1::TenantLimitsInfo info;
    grpc::Status s = admin_->SetTenantLimits(Ctx(admin_token_).get(), request, &info);
    EXPECT_TRUE(s.ok()) << Describe(s);
    return info;
  }

  grpc::Status TrySubmit(const std::string& token, v1::Job* job) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = GoodSpec();
    return training_->SubmitJob(Ctx(token).get(), request, job);
  }

  std::string ShowerFileBytes(int events) {
    showers::ToyMcConfig config;
    config.events = events;
    config.energy_min_gev = 20;
    config.energy_max_gev = 80;
    config.seed = 7;
    absl::StatusOr<showers::ShowerSet> set = showers::SimulateToyMc(config);
    EXPECT_TRUE(set.ok()) << set.status();
    const std::string path = dir_.File("quota.h5");
    EXPECT_TRUE(showers::WriteShowerFile(path, *set).ok());
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  grpc::Status Upload(const std::string& token, const std::string& name, const std::string& bytes) {
    auto ctx = Ctx(token, 30000);
    v1::Dataset dataset;
    auto writer = datasets_->UploadDataset(ctx.get(), &dataset);
    v1::UploadDatasetRequest header;
    header.mutable_header()->set_name(name);
    header.mutable_header()->set_size_bytes(bytes.size());
    header.mutable_header()->set_file_name("Ele_quota.h5");
    writer->Write(header);
    v1::UploadDatasetRequest chunk;
    chunk.set_chunk(bytes);
    writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  }

  // A WatchJob stream that stays open (the job stays QUEUED: no worker takes it).
  struct Watch {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
  };
  Watch OpenWatch(const std::string& token, const std::string& job_id) {
    Watch w;
    w.ctx = Ctx(token, 30000);
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    w.reader = training_->WatchJob(w.ctx.get(), request);
    return w;
  }
  // The first event arrives once the server runs the call (past every check), or the status.
  static grpc::Status FirstEventOrStatus(Watch& w) {
    v1::JobEvent event;
    if (w.reader->Read(&event)) return grpc::Status::OK;
    return w.reader->Finish();
  }
};

TEST_F(ServerQuotaTest, ConcurrentJobsAreLimitedByTheDefaultAndByAnOverride) {
  Restart({"--tenant-max-concurrent-jobs=2"});
  const std::string other = NewTenant("other");
  v1::Job a, b, job;
  ASSERT_TRUE(TrySubmit(token_, &a).ok());
  ASSERT_TRUE(TrySubmit(token_, &b).ok());
  grpc::Status s = TrySubmit(token_, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
  EXPECT_TRUE(Mentions(s, "max_concurrent_jobs")) << s.error_message();
  EXPECT_TRUE(Mentions(s, "is 2")) << s.error_message();
  EXPECT_TRUE(Mentions(s, "in use: 2")) << s.error_message();
  EXPECT_TRUE(TrySubmit(other, &job).ok()) << "the limit is per tenant";

  // A cancelled job no longer counts.
  v1::CancelJobRequest cancel;
  cancel.set_job_id(a.id());
  ASSERT_TRUE(training_->CancelJob(Ctx(token_).get(), cancel, &job).ok());
  ASSERT_EQ(WaitForJob(token_, a.id(), v1::JOB_STATE_CANCELLED, 10000).state(),
            v1::JOB_STATE_CANCELLED);
  s = TrySubmit(token_, &job);
  EXPECT_TRUE(s.ok()) << Describe(s);

  // An override raises it for this tenant only; GetTenantLimits shows it and the use.
  v1::TenantLimitValues values;
  values.set_max_concurrent_jobs(3);
  v1::TenantLimitsInfo info = SetLimits("physics", values);
  EXPECT_EQ(info.effective().max_concurrent_jobs(), 3);
  EXPECT_TRUE(info.overrides().has_max_concurrent_jobs());
  EXPECT_FALSE(info.overrides().has_max_dataset_bytes()) << "unset: the server's default";
  EXPECT_EQ(info.active_jobs(), 2);
  EXPECT_TRUE(TrySubmit(token_, &job).ok());
  s = TrySubmit(token_, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
  EXPECT_TRUE(Mentions(s, "is 3")) << s.error_message();
  // 0 = unlimited.
  values.set_max_concurrent_jobs(0);
  SetLimits("physics", values);
  EXPECT_TRUE(TrySubmit(token_, &job).ok());

  // Bad requests: a negative value, an unknown tenant, a tenant token.
  v1::SetTenantLimitsRequest bad;
  bad.set_tenant("physics");
  bad.mutable_overrides()->set_max_dataset_bytes(-5);
  v1::TenantLimitsInfo ignored;
  s = admin_->SetTenantLimits(Ctx(admin_token_).get(), bad, &ignored);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_TRUE(Mentions(s, "overrides.max_dataset_bytes")) << s.error_message();
  bad.set_tenant("nobody");
  bad.mutable_overrides()->set_max_dataset_bytes(5);
  s = admin_->SetTenantLimits(Ctx(admin_token_).get(), bad, &ignored);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  s = admin_->SetTenantLimits(Ctx(token_).get(), bad, &ignored);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
}

TEST_F(ServerQuotaTest, UploadsUnderWayAndRefusedUploadsCountAgainstStoredBytes) {
  const std::string bytes = ShowerFileBytes(4);
  const int64_t limit = bytes.size() * 3 / 2;
  Restart({"--tenant-max-dataset-bytes=" + std::to_string(limit), "--blob-gc-grace-ms=3000"});
  // An upload under way holds its bytes: a second one beside it would pass the limit. The server
  // reads the held upload's header a moment after the client sends it, so a beside upload may go
  // through first (and then the held one is refused): such a round is cleaned up and tried again.
  const std::string under_way =
      "and " + std::to_string(bytes.size()) + " bytes in uploads under way";
  v1::DeleteDatasetResponse deleted;
  grpc::Status beside, held_status;
  bool refused_beside = false;
  for (int round = 1; round <= 5 && !refused_beside; ++round) {
    // A retried round first lets the last one's refused bytes pass the collector's grace.
    if (round > 1) std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    auto ctx = Ctx(token_, 30000);
    v1::Dataset held;
    auto writer = datasets_->UploadDataset(ctx.get(), &held);
    v1::UploadDatasetRequest header;
    header.mutable_header()->set_name("under-way");
    header.mutable_header()->set_size_bytes(bytes.size());
    header.mutable_header()->set_file_name("Ele_quota.h5");
    ASSERT_TRUE(writer->Write(header));
    v1::UploadDatasetRequest part;
    part.set_chunk(bytes.substr(0, 100));
    writer->Write(part);  // fails when the server has refused the held upload already
    if (round > 1) std::this_thread::sleep_for(std::chrono::milliseconds(100 * round));
    const std::string name = "beside-" + std::to_string(round);
    beside = Upload(token_, name, bytes);
    refused_beside = beside.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                     Mentions(beside, under_way);
    writer->WritesDone();
    held_status = writer->Finish();
    if (beside.ok()) {
      v1::DeleteDatasetRequest del;
      del.set_dataset_id(name);
      ASSERT_TRUE(datasets_->DeleteDataset(Ctx(token_).get(), del, &deleted).ok());
    }
  }
  ASSERT_TRUE(refused_beside) << Describe(beside);
  // The held upload ended short of its declared size.
  EXPECT_EQ(held_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(held_status);
  // Its bytes come back when it ends.
  grpc::Status after;
  ASSERT_TRUE(Eventually([&] {
    after = Upload(token_, "after", bytes);
    return after.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED;
  }));
  ASSERT_TRUE(after.ok()) << Describe(after);
  v1::DeleteDatasetRequest del;
  del.set_dataset_id("after");
  ASSERT_TRUE(datasets_->DeleteDataset(Ctx(token_).get(), del, &deleted).ok());

  // A refused upload's blob stays until the blob collector's grace passes, and counts until then.
  std::string garbage(bytes.size(), 'g');
  grpc::Status refused = Upload(token_, "garbage", garbage);
  ASSERT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(refused);
  grpc::Status blocked = Upload(token_, "blocked", bytes);
  EXPECT_EQ(blocked.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(blocked);
  EXPECT_TRUE(Mentions(blocked, "refused recently")) << blocked.error_message();
  grpc::Status later;
  EXPECT_TRUE(Eventually(
      [&] {
        later = Upload(token_, "later", bytes);
        return later.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED;
      },
      10000));
  EXPECT_TRUE(later.ok()) << Describe(later);
}

TEST_F(ServerQuotaTest, StoredDatasetBytesAreLimited) {
  const std::string bytes = ShowerFileBytes(4);
  const int64_t limit = bytes.size() * 3 / 2;
  Restart({"--tenant-max-dataset-bytes=" + std::to_string(limit)});
  grpc::Status s = Upload(token_, "first", bytes);
  ASSERT_TRUE(s.ok()) << Describe(s);
  s = Upload(token_, "second", bytes);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
  EXPECT_TRUE(Mentions(s, "max_dataset_bytes")) << s.error_message();
  EXPECT_TRUE(Mentions(s, std::to_string(limit))) << s.error_message();
  EXPECT_TRUE(Mentions(s, "in use: " + std::to_string(bytes.size()))) << s.error_message();
  EXPECT_FALSE(Mentions(s, dir_.path())) << "no server paths in errors";

  v1::GetTenantLimitsRequest get;
  get.set_tenant("physics");
  v1::TenantLimitsInfo info;
  ASSERT_TRUE(admin_->GetTenantLimits(Ctx(admin_token_).get(), get, &info).ok());
  EXPECT_EQ(info.dataset_bytes_in_use(), static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(info.effective().max_dataset_bytes(), limit);

  // Deleting frees the room.
  v1::DeleteDatasetRequest del;
  del.set_dataset_id("first");
  v1::DeleteDatasetResponse deleted;
  ASSERT_TRUE(datasets_->DeleteDataset(Ctx(token_).get(), del, &deleted).ok());
  s = Upload(token_, "second", bytes);
  EXPECT_TRUE(s.ok()) << Describe(s);
}

TEST_F(ServerQuotaTest, ConcurrentGenerationStreamsAreLimited) {
  Restart({"--tenant-max-generation-streams=1"});
  GenWorker alpha = AddWorker("alpha", {sha_});
  alpha.fake->set_mode(Mode::kHold);
  LetHeartbeatsLand();
  Generated held;
  std::thread first([&] { held = Generate(token_, ListRequest("calo:1", {20})); });
  ASSERT_TRUE(Eventually([&] { return alpha.fake->active() == 1; }));
  Generated second = Generate(token_, ListRequest("calo:1", {20}));
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << Describe(second.status);
  EXPECT_TRUE(Mentions(second.status, "max_generation_streams")) << second.status.error_message();
  EXPECT_TRUE(Mentions(second.status, "in use: 1")) << second.status.error_message();
  alpha.fake->Release();
  first.join();
  EXPECT_TRUE(held.status.ok()) << Describe(held.status);
  Generated after = Generate(token_, ListRequest("calo:1", {20}));
  EXPECT_TRUE(after.status.ok()) << "the stream was released: " << Describe(after.status);
}

TEST_F(ServerQuotaTest, ARevokedTokenEndsAGenerateStreamThatIsWaitingForItsWorker) {
  Restart({"--stream-token-recheck-ms=300"});
  GenWorker alpha = AddWorker("alpha", {sha_});
  alpha.fake->set_mode(Mode::kHold);  // one chunk, then nothing until released or cancelled
  LetHeartbeatsLand();
  v1::CreateTokenRequest create;
  create.set_tenant("physics");
  v1::CreateTokenResponse issued;
  ASSERT_TRUE(admin_->CreateToken(Ctx(admin_token_).get(), create, &issued).ok());
  Generated held;
  std::thread call([&] {
    held = Generate(issued.token(), ListRequest("calo:1", {20, 30}), 30000);
  });
  ASSERT_TRUE(Eventually([&] { return alpha.fake->active() == 1; }));
  v1::RevokeTokenRequest revoke;
  revoke.set_token_id(issued.token_id());
  v1::RevokeTokenResponse revoked;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(admin_->RevokeToken(Ctx(admin_token_).get(), revoke, &revoked).ok());
  call.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(held.status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(held.status);
  EXPECT_TRUE(Mentions(held.status, "revoked")) << held.status.error_message();
  EXPECT_TRUE(Eventually([&] { return alpha.fake->cancelled_calls() == 1; }))
      << "the worker's call is cancelled too";
  alpha.fake->Release();
}

TEST_F(ServerQuotaTest, ShowersPerMinuteIsATokenBucket) {
  Restart({"--tenant-max-showers-per-minute=600"});
  v1::GenerateRequest big;
  big.set_model("calo:1");
  big.mutable_range()->mutable_energy_gev()->set_min(20);
  big.mutable_range()->mutable_energy_gev()->set_max(80);
  // Showers of a call no worker served are not counted.
  big.mutable_range()->set_count(500);
  for (int i = 0; i < 3; ++i) {
    Generated none = Generate(token_, big);
    EXPECT_EQ(none.status.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(none.status);
  }
  GenWorker alpha = AddWorker("alpha", {sha_});
  LetHeartbeatsLand();
  big.mutable_range()->set_count(700);
  Generated g = Generate(token_, big);
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(g.status);
  EXPECT_TRUE(Mentions(g.status, "max_showers_per_minute")) << g.status.error_message();
  EXPECT_TRUE(Mentions(g.status, "asks for 700")) << g.status.error_message();

  big.mutable_range()->set_count(500);
  g = Generate(token_, big);
  ASSERT_TRUE(g.status.ok()) << Describe(g.status);
  g = Generate(token_, big);
  EXPECT_EQ(g.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(g.status);
  EXPECT_TRUE(Mentions(g.status, "used in the last minute: ")) << g.status.error_message();
  // The same in machine-readable details: ErrorInfo QUOTA_EXCEEDED naming the limit, RetryInfo.
  const StatusDetails details = GetStatusDetails(FromGrpcStatus(g.status));
  EXPECT_EQ(details.reason, "QUOTA_EXCEEDED");
  EXPECT_EQ(details.metadata.at("limit"), "max_showers_per_minute");
  EXPECT_EQ(details.metadata.at("value"), "600");
  ASSERT_TRUE(details.retry_delay.has_value());
  EXPECT_GT(*details.retry_delay, absl::Seconds(1));
  EXPECT_LE(*details.retry_delay, absl::Seconds(60));
  EXPECT_TRUE(Mentions(g.status, "this request: 500")) << g.status.error_message();
  EXPECT_TRUE(Mentions(g.status, "Try again in")) << g.status.error_message();
  // 10 showers per second come back: 100 are there after a second.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  big.mutable_range()->set_count(100);
  g = Generate(token_, big);
  EXPECT_TRUE(g.status.ok()) << Describe(g.status);
}

TEST_F(ServerQuotaTest, LongLivedCallsPerTenantAreBounded) {
  Restart({"--tenant-max-streams=2"});
  const std::string other = NewTenant("other");
  v1::Job job, other_job;
  ASSERT_TRUE(TrySubmit(token_, &job).ok());
  ASSERT_TRUE(TrySubmit(other, &other_job).ok());
  Watch a = OpenWatch(token_, job.id());
  Watch b = OpenWatch(token_, job.id());
  ASSERT_TRUE(FirstEventOrStatus(a).ok());
  ASSERT_TRUE(FirstEventOrStatus(b).ok());
  Watch c = OpenWatch(token_, job.id());
  grpc::Status s = FirstEventOrStatus(c);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
  EXPECT_TRUE(Mentions(s, "--tenant-max-streams")) << s.error_message();
  EXPECT_TRUE(Mentions(s, "in use: 2")) << s.error_message();
  Watch d = OpenWatch(other, other_job.id());
  EXPECT_TRUE(FirstEventOrStatus(d).ok()) << "another tenant is not affected";
  d.ctx->TryCancel();
  // Ending one frees its slot.
  a.ctx->TryCancel();
  a.reader->Finish();
  EXPECT_TRUE(Eventually([&] {
    Watch e = OpenWatch(token_, job.id());
    const bool ok = FirstEventOrStatus(e).ok();
    e.ctx->TryCancel();
    return ok;
  }));
  b.ctx->TryCancel();
}

}  // namespace
}  // namespace gantry::testing
