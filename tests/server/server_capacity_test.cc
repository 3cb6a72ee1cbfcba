// Isolation of capacity against the real gantry-server and PostgreSQL: every per-tenant limit has
// a safe non-zero default that a flag changes for every tenant and AdminService.SetTenantLimits
// per tenant; showers per Generate call and training jobs per study are capped; a client stream
// (UploadDataset) whose header is late or that goes quiet ends with DEADLINE_EXCEEDED and frees
// its slot, and one tenant's silent streams do not stop another tenant's calls. The listeners'
// thread pools (grpc::ResourceQuota) are bounded, the workers' apart from the tenants', and the
// watches (WatchJob, WatchStudy) take no thread from them while they wait.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/grpc_status.h"
#include "base/status_details.h"
#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"
#include "tests/server/generation_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using Clock = std::chrono::steady_clock;

bool Mentions(const grpc::Status& s, const std::string& text) {
  return s.error_message().find(text) != std::string::npos;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// An upload stream opened and left for the test to drive (or to leave silent). Movable: the
// writer keeps pointers to the context and the response, which stay where they are.
struct OpenUpload {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<v1::Dataset> dataset = std::make_unique<v1::Dataset>();
  std::unique_ptr<grpc::ClientWriter<v1::UploadDatasetRequest>> writer;
};

class ServerCapacityTest : public GenerationFixture {
 protected:
  v1::TenantLimitsInfo Limits(const std::string& tenant) {
    v1::GetTenantLimitsRequest request;
    request.set_tenant(tenant);
    v1::TenantLimitsInfo info;
    grpc::Status s = admin_->GetTenantLimits(Ctx(admin_token_).get(), request, &info);
    EXPECT_TRUE(s.ok()) << Describe(s);
    return info;
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

  std::string ShowerFileBytes(int events) {
    showers::ToyMcConfig config;
    config.events = events;
    config.energy_min_gev = 20;
    config.energy_max_gev = 80;
    config.seed = 7;
    absl::StatusOr<showers::ShowerSet> set = showers::SimulateToyMc(config);
    EXPECT_TRUE(set.ok()) << set.status();
    const std::string path = dir_.File("capacity.h5");
    EXPECT_TRUE(showers::WriteShowerFile(path, *set).ok());
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  static OpenUpload Open(v1::DatasetService::Stub& stub, const std::string& token,
                         int deadline_ms = 30000) {
    OpenUpload u;
    u.ctx = Ctx(token, deadline_ms);
    u.writer = stub.UploadDataset(u.ctx.get(), u.dataset.get());
    return u;
  }
  static v1::UploadDatasetRequest Header(const std::string& name, int64_t size) {
    v1::UploadDatasetRequest header;
    header.mutable_header()->set_name(name);
    header.mutable_header()->set_size_bytes(size);
    header.mutable_header()->set_file_name("Ele_capacity.h5");
    return header;
  }
  static v1::UploadDatasetRequest Chunk(const std::string& bytes) {
    v1::UploadDatasetRequest chunk;
    chunk.set_chunk(bytes);
    return chunk;
  }

  // A whole upload: the header, `bytes` in chunks of `chunk_bytes` with `pause` between them.
  grpc::Status Upload(v1::DatasetService::Stub& stub, const std::string& token,
                      const std::string& name, const std::string& bytes,
                      size_t chunk_bytes = 1 << 20,
                      std::chrono::milliseconds pause = std::chrono::milliseconds(0)) {
    OpenUpload u = Open(stub, token);
    u.writer->Write(Header(name, bytes.size()));
    for (size_t at = 0; at < bytes.size(); at += chunk_bytes) {
      if (at > 0) std::this_thread::sleep_for(pause);
      if (!u.writer->Write(Chunk(bytes.substr(at, chunk_bytes)))) break;
    }
    u.writer->WritesDone();
    return u.writer->Finish();
  }

  // A channel of its own (no connection shared with the fixture's stubs), like another client.
  std::shared_ptr<grpc::Channel> SeparateChannel() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args);
  }

  static v1::StudySpec StudyOf(int trials, int folds) {
    v1::StudySpec spec;
    spec.set_display_name("capacity");
    v1::JobSpec* job = spec.mutable_base_job();
    *job = GoodSpec();
    job->set_world_size(1);
    job->set_dataset("toymc:layout=25,events=40,seed=3,emin=10,emax=100");
    v1::SearchParameter* lr = spec.add_parameters();
    lr->set_name("hyper_parameters.learning_rate");
    lr->set_kind(v1::SearchParameter::KIND_LOG_CONTINUOUS);
    lr->set_min(1e-4);
    lr->set_max(1e-2);
    spec.mutable_budget()->set_max_trials(trials);
    spec.mutable_budget()->set_max_parallel_trials(1);
    spec.set_folds(folds);
    return spec;
  }
  grpc::Status CreateStudy(const v1::StudySpec& spec, v1::Study* study = nullptr) {
    v1::CreateStudyRequest request;
    *request.mutable_spec() = spec;
    v1::Study created;
    return studies_->CreateStudy(Ctx(token_).get(), request, study ? study : &created);
  }

  // `n` uploads that never send a byte, each waited for on a thread of its own; the server holds
  // each one it admits (a synchronous handler, one thread) until its header deadline.
  struct SilentUploads {
    std::vector<OpenUpload> uploads;
    std::vector<grpc::Status> results;
    std::vector<std::thread> waiters;

    // Waits for every upload to end; how many ended with `code`.
    int Count(grpc::StatusCode code) {
      for (std::thread& t : waiters) t.join();
      waiters.clear();
      int n = 0;
      for (const grpc::Status& s : results) n += s.error_code() == code ? 1 : 0;
      return n;
    }
  };
  void OpenSilent(int n, SilentUploads* held) {
    held->uploads.reserve(n);
    held->results.resize(n);
    for (int i = 0; i < n; ++i) held->uploads.push_back(Open(*datasets_, token_));
    for (int i = 0; i < n; ++i) {
      held->waiters.emplace_back([held, i] { held->results[i] = held->uploads[i].writer->Finish(); });
    }
    // The server has admitted what it can and refused the rest.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }

  // A WatchJob stream opened on `stub`.
  struct Watch {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
  };
  static Watch OpenWatch(v1::TrainingService::Stub& stub, const std::string& token,
                         const std::string& job_id) {
    Watch w;
    w.ctx = Ctx(token, 30000);
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    w.reader = stub.WatchJob(w.ctx.get(), request);
    return w;
  }
};

TEST_F(ServerCapacityTest, TheThreadPoolIsBoundedAndTheServerStaysUp) {
  RestartServer({"--max-threads=8", "--tenant-max-streams=0", "--stream-header-timeout-ms=3000"});
  // Far more held streams than threads: the server refuses the excess instead of growing.
  constexpr int kSilent = 40;
  SilentUploads held;
  OpenSilent(kSilent, &held);
  const int exhausted = held.Count(grpc::StatusCode::RESOURCE_EXHAUSTED);
  const int cut = kSilent - exhausted;
  EXPECT_GT(exhausted, 0) << "every silent upload was admitted";
  EXPECT_GT(cut, 0) << "none was admitted";
  EXPECT_LE(cut, 8) << "more streams were held than the pool has threads";
  for (const grpc::Status& s : held.results) {
    if (s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << Describe(s);
    }
  }
  // Once the streams are gone the server answers again.
  EXPECT_TRUE(Eventually([&] { return HealthStatus() == 1; }, 10000));
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = GoodSpec();
  v1::Job job;
  EXPECT_TRUE(Eventually(
      [&] { return training_->SubmitJob(Ctx(token_).get(), submit, &job).ok(); }, 10000));
}

TEST_F(ServerCapacityTest, TenantCallsCannotTakeTheWorkersThreads) {
  // Port 45031 is this test's (tests/e2e uses 45010-45013).
  RestartServer({"--max-threads=8", "--tenant-max-streams=0", "--stream-header-timeout-ms=4000",
                 "--worker-listen=127.0.0.1:45031"});
  // A tenant holds far more streams than the main listener has threads.
  SilentUploads held;
  OpenSilent(40, &held);
  // The workers' listener has threads of its own: a worker registers and opens its stream.
  auto worker_channel = grpc::CreateChannel("127.0.0.1:45031", grpc::InsecureChannelCredentials());
  const auto started = Clock::now();
  DriverWorker steady(worker_channel, join_, "steady", 1);
  EXPECT_TRUE(steady.status().ok()) << Describe(steady.status());
  EXPECT_LT(SecondsSince(started), 3.0) << "the worker registered while the streams were held";
  EXPECT_GT(held.Count(grpc::StatusCode::RESOURCE_EXHAUSTED), 0) << "the main listener was full";
}

TEST_F(ServerCapacityTest, WatchesHoldNoThreadOfTheBoundedPool) {
  RestartServer({"--max-threads=8", "--tenant-max-streams=0"});
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = GoodSpec();
  v1::Job job;
  ASSERT_TRUE(training_->SubmitJob(Ctx(token_).get(), submit, &job).ok());
  // Five times as many watches as the pool has threads, on a connection of their own: every one
  // is served (a synchronous WatchJob held a thread each, and the ninth was refused).
  std::shared_ptr<grpc::Channel> channel = SeparateChannel();
  auto watcher = v1::TrainingService::NewStub(channel);
  constexpr int kWatches = 40;
  std::vector<Watch> watches;
  watches.reserve(kWatches);
  for (int i = 0; i < kWatches; ++i) watches.push_back(OpenWatch(*watcher, token_, job.id()));
  for (int i = 0; i < kWatches; ++i) {
    v1::JobEvent first;
    ASSERT_TRUE(watches[i].reader->Read(&first)) << "watch " << i << ": "
                                                  << Describe(watches[i].reader->Finish());
    EXPECT_EQ(first.state_change().to(), v1::JOB_STATE_QUEUED);
  }
  // Meanwhile the pool's threads answer other calls at once.
  auto started = Clock::now();
  v1::GetJobRequest get;
  get.set_job_id(job.id());
  v1::Job got;
  grpc::Status s = training_->GetJob(Ctx(token_, 2000).get(), get, &got);
  EXPECT_TRUE(s.ok()) << Describe(s);
  EXPECT_LT(SecondsSince(started), 1.0);
  // A change reaches every watch, and each ends once the job is terminal.
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job.id());
  v1::Job cancelled;
  ASSERT_TRUE(training_->CancelJob(Ctx(token_).get(), cancel, &cancelled).ok());
  started = Clock::now();
  for (Watch& w : watches) {
    v1::JobEvent event;
    bool saw_end = false;
    while (w.reader->Read(&event)) {
      saw_end |= event.has_state_change() && event.state_change().to() == v1::JOB_STATE_CANCELLED;
    }
    const grpc::Status end = w.reader->Finish();
    EXPECT_TRUE(end.ok()) << Describe(end);
    EXPECT_TRUE(saw_end);
  }
  EXPECT_LT(SecondsSince(started), 5.0);
}

TEST_F(ServerCapacityTest, StudyWatchesHoldNoThreadOfTheBoundedPool) {
  RestartServer({"--max-threads=8", "--tenant-max-streams=0"});
  v1::Study study;
  const grpc::Status created = CreateStudy(StudyOf(2, 0), &study);
  ASSERT_TRUE(created.ok()) << Describe(created);
  std::shared_ptr<grpc::Channel> channel = SeparateChannel();
  auto watcher = v1::StudyService::NewStub(channel);
  constexpr int kWatches = 30;
  struct StudyWatch {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientReader<v1::StudyUpdate>> reader;
  };
  std::vector<StudyWatch> watches(kWatches);
  v1::WatchStudyRequest request;
  request.set_study_id(study.id());
  for (StudyWatch& w : watches) {
    w.ctx = Ctx(token_, 30000);
    w.reader = watcher->WatchStudy(w.ctx.get(), request);
  }
  for (int i = 0; i < kWatches; ++i) {
    v1::StudyUpdate first;
    ASSERT_TRUE(watches[i].reader->Read(&first)) << "watch " << i << ": "
                                                  << Describe(watches[i].reader->Finish());
    EXPECT_EQ(first.study().id(), study.id());
  }
  EXPECT_EQ(HealthStatus(), 1);
  // A cancelled watch ends with CANCELLED and frees its place; the rest stay open.
  watches[0].ctx->TryCancel();
  EXPECT_EQ(watches[0].reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  v1::GetStudyRequest get;
  get.set_study_id(study.id());
  v1::Study got;
  EXPECT_TRUE(studies_->GetStudy(Ctx(token_, 2000).get(), get, &got).ok());
  for (int i = 1; i < kWatches; ++i) watches[i].ctx->TryCancel();
}

TEST_F(ServerCapacityTest, EveryLimitHasASafeDefaultAFlagAndAPerTenantOverride) {
  RestartServer({});  // no limit flags: the server's own defaults
  NewTenant("other");
  v1::TenantLimitValues e = Limits("other").effective();
  EXPECT_EQ(e.max_dataset_bytes(), int64_t{256} << 30);
  EXPECT_EQ(e.max_concurrent_jobs(), 64);
  EXPECT_EQ(e.max_generation_streams(), 32);
  EXPECT_EQ(e.max_showers_per_minute(), 1000000);
  EXPECT_EQ(e.max_streams(), 64);
  EXPECT_EQ(e.max_showers_per_request(), 100000);
  EXPECT_EQ(e.max_study_jobs(), 500);
  EXPECT_FALSE(Limits("other").overrides().has_max_streams()) << "defaults, not overrides";

  // Per tenant: an override of each new limit, shown as override and enforced value.
  v1::TenantLimitValues values;
  values.set_max_streams(3);
  values.set_max_showers_per_request(10);
  values.set_max_study_jobs(7);
  v1::TenantLimitsInfo info = SetLimits("physics", values);
  EXPECT_EQ(info.overrides().max_streams(), 3);
  EXPECT_EQ(info.effective().max_streams(), 3);
  EXPECT_EQ(info.effective().max_showers_per_request(), 10);
  EXPECT_EQ(info.effective().max_study_jobs(), 7);
  EXPECT_EQ(info.effective().max_concurrent_jobs(), 64) << "the rest keep the defaults";
  EXPECT_EQ(Limits("other").effective().max_streams(), 64) << "per tenant";

  // Server-wide: flags change the defaults; stored overrides survive and still win.
  RestartServer({"--tenant-max-streams=5", "--max-showers-per-request=50",
                 "--tenant-max-study-jobs=9", "--tenant-max-concurrent-jobs=0"});
  e = Limits("other").effective();
  EXPECT_EQ(e.max_streams(), 5);
  EXPECT_EQ(e.max_showers_per_request(), 50);
  EXPECT_EQ(e.max_study_jobs(), 9);
  EXPECT_EQ(e.max_concurrent_jobs(), 0) << "0 = unlimited, when an operator says so";
  info = Limits("physics");
  EXPECT_EQ(info.effective().max_streams(), 3);
  EXPECT_EQ(info.effective().max_showers_per_request(), 10);

  // Negative overrides are refused, naming the field.
  v1::SetTenantLimitsRequest bad;
  bad.set_tenant("physics");
  bad.mutable_overrides()->set_max_study_jobs(-1);
  grpc::Status s = admin_->SetTenantLimits(Ctx(admin_token_).get(), bad, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_TRUE(Mentions(s, "overrides.max_study_jobs")) << s.error_message();
}

TEST_F(ServerCapacityTest, GenerateAboveThePerCallCapIsRefusedSayingHowToRaiseIt) {
  RestartServer({});
  v1::GenerateRequest r;
  r.set_model("calo:1");
  r.mutable_range()->mutable_energy_gev()->set_min(10);
  r.mutable_range()->mutable_energy_gev()->set_max(100);
  r.mutable_range()->set_count(1000000);  // the million one call could ask for before
  Generated over = Generate(token_, r);
  EXPECT_EQ(over.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << Describe(over.status);
  EXPECT_TRUE(Mentions(over.status, "the maximum is 100000 per request"))
      << over.status.error_message();
  EXPECT_TRUE(Mentions(over.status, "max_showers_per_request")) << over.status.error_message();
  EXPECT_TRUE(Mentions(over.status, "--max-showers-per-request")) << over.status.error_message();
  const StatusDetails details = GetStatusDetails(FromGrpcStatus(over.status));
  EXPECT_EQ(details.reason, "QUOTA_EXCEEDED");
  EXPECT_EQ(details.metadata.at("limit"), "max_showers_per_request");
  EXPECT_EQ(details.metadata.at("value"), "100000");

  // A tenant's override lowers (or raises) it for that tenant alone.
  v1::TenantLimitValues values;
  values.set_max_showers_per_request(20);
  SetLimits("physics", values);
  GenWorker alpha = AddWorker("alpha", {sha_});
  LetHeartbeatsLand();
  over = Generate(token_, ListRequest("calo:1", std::vector<double>(21, 50.0)));
  EXPECT_EQ(over.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << Describe(over.status);
  EXPECT_TRUE(Mentions(over.status, "list.items: 21 showers requested; the maximum is 20"))
      << over.status.error_message();
  Generated fits = Generate(token_, ListRequest("calo:1", std::vector<double>(20, 50.0)));
  EXPECT_TRUE(fits.status.ok()) << Describe(fits.status);
  EXPECT_EQ(fits.showers(), 20);
}

TEST_F(ServerCapacityTest, ACreateStudyOverTrialsTimesFoldsIsRefused) {
  RestartServer({"--study-interval-ms=0"});  // stored, never run
  // 1,000 trials x 20 folds would queue 20,000 training jobs.
  grpc::Status s = CreateStudy(StudyOf(1000, 20));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
  EXPECT_TRUE(Mentions(s, "max_study_jobs")) << s.error_message();
  EXPECT_TRUE(Mentions(s, "is 500")) << s.error_message();
  EXPECT_TRUE(Mentions(s, "1000 trials x 20 folds = 20000")) << s.error_message();
  EXPECT_TRUE(Mentions(s, "--max-study-jobs")) << s.error_message();
  // Trials alone count too; at the limit is allowed.
  s = CreateStudy(StudyOf(501, 0));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << Describe(s);
  s = CreateStudy(StudyOf(100, 5));
  EXPECT_TRUE(s.ok()) << Describe(s);
  // An override raises it for this tenant.
  v1::TenantLimitValues values;
  values.set_max_study_jobs(20000);
  SetLimits("physics", values);
  s = CreateStudy(StudyOf(1000, 20));
  EXPECT_TRUE(s.ok()) << Describe(s);
}

TEST_F(ServerCapacityTest, ASilentUploadIsCutAtItsHeaderDeadlineAndItsSlotIsFreed) {
  RestartServer({"--stream-header-timeout-ms=600", "--stream-idle-timeout-ms=5000",
                 "--tenant-max-streams=1"});
  const auto start = Clock::now();
  OpenUpload silent = Open(*datasets_, token_);
  grpc::Status s = silent.writer->Finish();  // nothing written: not even WritesDone
  const double took = SecondsSince(start);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << Describe(s);
  EXPECT_TRUE(Mentions(s, "header: none arrived within 600ms")) << s.error_message();
  EXPECT_TRUE(Mentions(s, "--stream-header-timeout-ms")) << s.error_message();
  EXPECT_GE(took, 0.5);
  EXPECT_LT(took, 3.0) << "cut at the header deadline, not at the client's 30 s";

  // Its slot (the tenant's only one) is free again: a whole upload goes through.
  const std::string bytes = ShowerFileBytes(4);
  grpc::Status upload;
  EXPECT_TRUE(Eventually(
      [&] {
        upload = Upload(*datasets_, token_, "after-silence", bytes);
        return upload.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED;
      },
      3000));
  EXPECT_TRUE(upload.ok()) << Describe(upload);
}

TEST_F(ServerCapacityTest, AnUploadThatStopsHalfWayIsCutAtTheIdleDeadline) {
  RestartServer({"--stream-header-timeout-ms=5000", "--stream-idle-timeout-ms=1000",
                 "--tenant-max-streams=1"});
  const std::string bytes = ShowerFileBytes(4);
  OpenUpload stalled = Open(*datasets_, token_);
  ASSERT_TRUE(stalled.writer->Write(Header("stalled", bytes.size())));
  ASSERT_TRUE(stalled.writer->Write(Chunk(bytes.substr(0, 100))));
  const auto start = Clock::now();
  grpc::Status s = stalled.writer->Finish();
  const double took = SecondsSince(start);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << Describe(s);
  EXPECT_TRUE(
      Mentions(s, "sent nothing for 1s after 100 of " + std::to_string(bytes.size()) + " bytes"))
      << s.error_message();
  EXPECT_TRUE(Mentions(s, "--stream-idle-timeout-ms")) << s.error_message();
  EXPECT_GE(took, 0.8);
  EXPECT_LT(took, 4.0);

  // Pauses shorter than the idle deadline are fine: the clock restarts with every message. The
  // slot of the stalled upload is free for it.
  grpc::Status slow;
  EXPECT_TRUE(Eventually(
      [&] {
        slow = Upload(*datasets_, token_, "slow-but-steady", bytes, bytes.size() / 3 + 1,
                      std::chrono::milliseconds(600));
        return slow.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED;
      },
      3000));
  EXPECT_TRUE(slow.ok()) << Describe(slow);
}

TEST_F(ServerCapacityTest, ManySilentStreamsOfOneTenantDoNotStopAnother) {
  // The header deadline outlasts the checks below, so the silent streams are all held meanwhile.
  RestartServer({"--stream-header-timeout-ms=4000", "--stream-idle-timeout-ms=4000"});
  const std::string victim = NewTenant("victim");
  const std::string bytes = ShowerFileBytes(4);
  // More silent uploads than the tenant's default 64 stream slots, on a connection of their own.
  std::shared_ptr<grpc::Channel> attacker_channel = SeparateChannel();
  auto attacker = v1::DatasetService::NewStub(attacker_channel);
  constexpr int kSilent = 80;
  std::vector<OpenUpload> silent;
  silent.reserve(kSilent);
  const auto opened = Clock::now();
  for (int i = 0; i < kSilent; ++i) silent.push_back(Open(*attacker, token_));
  std::vector<grpc::Status> results(kSilent);
  std::vector<double> ended_after(kSilent);
  std::vector<std::thread> waiters;
  for (int i = 0; i < kSilent; ++i) {
    waiters.emplace_back([&, i] {
      results[i] = silent[i].writer->Finish();
      ended_after[i] = SecondsSince(opened);
    });
  }
  // The server holds the silent streams it admitted (it refuses the rest at once).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  // Meanwhile the other tenant's calls succeed, each within a bound.
  auto started = Clock::now();
  v1::ListDatasetsRequest list;
  v1::ListDatasetsResponse listed;
  grpc::Status s = datasets_->ListDatasets(Ctx(victim, 2000).get(), list, &listed);
  EXPECT_TRUE(s.ok()) << Describe(s);
  EXPECT_LT(SecondsSince(started), 1.0);
  started = Clock::now();
  s = Upload(*datasets_, victim, "unaffected", bytes);
  EXPECT_TRUE(s.ok()) << Describe(s);
  EXPECT_LT(SecondsSince(started), 2.5);
  const double victim_done = SecondsSince(opened);
  EXPECT_LT(victim_done, 3.5) << "the checks ran while the silent streams were held";

  for (std::thread& t : waiters) t.join();
  int refused = 0, cut = 0;
  for (int i = 0; i < kSilent; ++i) {
    if (results[i].error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_TRUE(Mentions(results[i], "max_streams")) << results[i].error_message();
    } else {
      EXPECT_EQ(results[i].error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
          << Describe(results[i]);
      EXPECT_GE(ended_after[i], victim_done) << "held while the victim's calls ran";
      EXPECT_LT(ended_after[i], 8.0);
      ++cut;
    }
  }
  EXPECT_EQ(cut, 64) << "the tenant's default stream slots";
  EXPECT_EQ(refused, kSilent - 64);
  // Every slot is free again.
  grpc::Status again;
  EXPECT_TRUE(Eventually(
      [&] {
        again = Upload(*attacker, token_, "after-the-flood", bytes);
        return again.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED;
      },
      3000));
  EXPECT_TRUE(again.ok()) << Describe(again);
}

}  // namespace
}  // namespace gantry::testing
