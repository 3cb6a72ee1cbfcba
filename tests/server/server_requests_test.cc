// Integration tests of request handling: a barrage of bad requests (exact code, message naming the
// field, server still serving), and the job life cycle (submit, list, get, cancel, watch, logs).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/server/driver_worker.h"
#include "tests/server/server_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

class ServerRequestsTest : public ServerFixture {
 protected:
  grpc::Status Submit(const std::string& token, const v1::JobSpec& spec, v1::Job* job,
                      const std::string& request_id = "") {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = spec;
    request.set_request_id(request_id);
    return training_->SubmitJob(Ctx(token).get(), request, job);
  }
  grpc::Status SubmitWith(const std::function<void(v1::JobSpec&)>& edit) {
    v1::JobSpec spec = GoodSpec();
    edit(spec);
    v1::Job job;
    return Submit(admin_token_, spec, &job);
  }
  grpc::Status Generate(const v1::GenerateRequest& request) {
    auto ctx = Ctx(admin_token_);
    auto reader = generation_->Generate(ctx.get(), request);
    v1::GenerateChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }
  grpc::Status Upload(const std::vector<v1::UploadDatasetRequest>& messages) {
    auto ctx = Ctx(admin_token_);
    v1::Dataset dataset;
    auto writer = datasets_->UploadDataset(ctx.get(), &dataset);
    for (const auto& m : messages) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }
  static v1::UploadDatasetRequest Header(const std::string& name, int64_t size) {
    v1::UploadDatasetRequest m;
    m.mutable_header()->set_name(name);
    m.mutable_header()->set_size_bytes(size);
    return m;
  }
};

struct BadRequest {
  std::string what;
  std::function<grpc::Status()> call;
  grpc::StatusCode code;
  std::string must_mention;  // the offending field (or value) named in the message
};

TEST_F(ServerRequestsTest, BadRequestsGetTheRightCodeAndNameTheFieldAndTheServerKeepsServing) {
  using C = grpc::StatusCode;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  v1::CreateJoinTokenRequest join_request;
  v1::CreateTokenResponse join;
  ASSERT_TRUE(admin_->CreateJoinToken(Ctx(admin_token_).get(), join_request, &join).ok());
  const std::string join_token = join.token();
  v1::RegisterRequest fetcher;
  fetcher.set_name("fetcher");
  fetcher.set_slots(1);
  fetcher.set_advertise_host("127.0.0.1");
  v1::RegisterResponse fetcher_registered;
  ASSERT_TRUE(worker_->Register(Ctx(join_token).get(), fetcher, &fetcher_registered).ok());
  const std::string worker_credential = fetcher_registered.worker_credential();

  std::vector<BadRequest> cases = {
      {"submit without spec",
       [&] {
         v1::Job job;
         return training_->SubmitJob(Ctx(admin_token_).get(), v1::SubmitJobRequest(), &job);
       },
       C::INVALID_ARGUMENT, "spec"},
      {"missing preset", [&] { return SubmitWith([](auto& s) { s.clear_model_preset(); }); },
       C::INVALID_ARGUMENT, "spec.model_preset"},
      {"unknown preset",
       [&] { return SubmitWith([](auto& s) { s.set_model_preset("3dgan-99"); }); },
       C::INVALID_ARGUMENT, "spec.model_preset"},
      {"world_size 0", [&] { return SubmitWith([](auto& s) { s.set_world_size(0); }); },
       C::INVALID_ARGUMENT, "spec.world_size"},
      {"world_size huge", [&] { return SubmitWith([](auto& s) { s.set_world_size(1000); }); },
       C::INVALID_ARGUMENT, "spec.world_size"},
      {"batch 0",
       [&] {
         return SubmitWith([](auto& s) { s.mutable_hyper_parameters()->set_batch_per_rank(0); });
       },
       C::INVALID_ARGUMENT, "hyper_parameters.batch_per_rank"},
      {"batch huge",
       [&] {
         return SubmitWith(
             [](auto& s) { s.mutable_hyper_parameters()->set_batch_per_rank(1 << 20); });
       },
       C::INVALID_ARGUMENT, "hyper_parameters.batch_per_rank"},
      {"epochs 0",
       [&] { return SubmitWith([](auto& s) { s.mutable_hyper_parameters()->set_epochs(0); }); },
       C::INVALID_ARGUMENT, "hyper_parameters.epochs"},
      {"negative learning rate",
       [&] {
         return SubmitWith([](auto& s) { s.mutable_hyper_parameters()->set_learning_rate(-1); });
       },
       C::INVALID_ARGUMENT, "hyper_parameters.learning_rate"},
      {"NaN learning rate",
       [&] {
         return SubmitWith([&](auto& s) { s.mutable_hyper_parameters()->set_learning_rate(nan); });
       },
       C::INVALID_ARGUMENT, "hyper_parameters.learning_rate"},
      {"unknown optimizer",
       [&] {
         return SubmitWith([](auto& s) { s.mutable_hyper_parameters()->set_optimizer("sgd"); });
       },
       C::INVALID_ARGUMENT, "hyper_parameters.optimizer"},
      {"adam (not implemented by the trainer)",
       [&] {
         return SubmitWith([](auto& s) { s.mutable_hyper_parameters()->set_optimizer("adam"); });
       },
       C::INVALID_ARGUMENT, "use \"rmsprop\""},
      {"keep_best with validation disabled",
       [&] {
         return SubmitWith([](auto& s) {
           s.mutable_checkpoint_policy()->set_keep_best(true);
           s.mutable_validation()->set_disabled(true);
         });
       },
       C::INVALID_ARGUMENT, "spec.checkpoint_policy.keep_best: needs validation"},
      {"priority out of range", [&] { return SubmitWith([](auto& s) { s.set_priority(500); }); },
       C::INVALID_ARGUMENT, "spec.priority"},
      {"max_restarts negative", [&] { return SubmitWith([](auto& s) { s.set_max_restarts(-1); }); },
       C::INVALID_ARGUMENT, "spec.max_restarts"},
      {"missing dataset", [&] { return SubmitWith([](auto& s) { s.clear_dataset(); }); },
       C::INVALID_ARGUMENT, "spec.dataset"},
      {"unknown dataset scheme",
       [&] { return SubmitWith([](auto& s) { s.set_dataset("s3://bucket/showers.h5"); }); },
       C::INVALID_ARGUMENT, "spec.dataset"},
      {"relative file path",
       [&] { return SubmitWith([](auto& s) { s.set_dataset("file://data/showers.h5"); }); },
       C::INVALID_ARGUMENT, "spec.dataset"},
      {"bad toymc spec",
       [&] { return SubmitWith([](auto& s) { s.set_dataset("toymc:layout=99,events=10"); }); },
       C::INVALID_ARGUMENT, "spec.dataset"},
      {"toymc layout does not fit the preset",
       [&] {
         return SubmitWith([](auto& s) {
           s.set_model_preset("3dgan-25");
           s.set_dataset("toymc:layout=51,events=10");
         });
       },
       C::INVALID_ARGUMENT, "spec.dataset"},
      {"unknown uploaded dataset",
       [&] {
         return SubmitWith(
             [](auto& s) { s.set_dataset("ds-00000000-0000-0000-0000-000000000000"); });
       },
       C::NOT_FOUND, "spec.dataset"},
      {"bad label key",
       [&] { return SubmitWith([](auto& s) { (*s.mutable_labels())["bad key!"] = "x"; }); },
       C::INVALID_ARGUMENT, "spec.labels"},
      {"malformed initial model",
       [&] { return SubmitWith([](auto& s) { s.set_initial_model("no-version"); }); },
       C::INVALID_ARGUMENT, "spec.initial_model"},
      {"unknown initial model",
       [&] { return SubmitWith([](auto& s) { s.set_initial_model("ghost:1"); }); }, C::NOT_FOUND,
       "spec.initial_model"},
      {"negative validation energy",
       [&] { return SubmitWith([](auto& s) { s.mutable_validation()->add_energies(-5); }); },
       C::INVALID_ARGUMENT, "spec.validation.energies[0]"},
      {"label flip probability 0.7",
       [&] {
         return SubmitWith(
             [](auto& s) { s.mutable_hyper_parameters()->set_label_flip_probability(0.7); });
       },
       C::INVALID_ARGUMENT, "hyper_parameters.label_flip_probability"},
      {"get job without id",
       [&] {
         v1::Job job;
         return training_->GetJob(Ctx(admin_token_).get(), v1::GetJobRequest(), &job);
       },
       C::INVALID_ARGUMENT, "job_id"},
      {"get job with a malformed id",
       [&] {
         v1::GetJobRequest r;
         r.set_job_id("12345");
         v1::Job job;
         return training_->GetJob(Ctx(admin_token_).get(), r, &job);
       },
       C::INVALID_ARGUMENT, "job_id"},
      {"get unknown job",
       [&] {
         v1::GetJobRequest r;
         r.set_job_id("job-00000000-0000-0000-0000-000000000000");
         v1::Job job;
         return training_->GetJob(Ctx(admin_token_).get(), r, &job);
       },
       C::NOT_FOUND, "job-00000000-0000-0000-0000-000000000000"},
      {"page size too big",
       [&] {
         v1::ListJobsRequest r;
         r.mutable_page()->set_page_size(5000);
         v1::ListJobsResponse out;
         return training_->ListJobs(Ctx(admin_token_).get(), r, &out);
       },
       C::INVALID_ARGUMENT, "page.page_size"},
      {"negative page size",
       [&] {
         v1::ListJobsRequest r;
         r.mutable_page()->set_page_size(-1);
         v1::ListJobsResponse out;
         return training_->ListJobs(Ctx(admin_token_).get(), r, &out);
       },
       C::INVALID_ARGUMENT, "page.page_size"},
      {"unknown job state filter",
       [&] {
         v1::ListJobsRequest r;
         r.add_states(static_cast<v1::JobState>(99));
         v1::ListJobsResponse out;
         return training_->ListJobs(Ctx(admin_token_).get(), r, &out);
       },
       C::INVALID_ARGUMENT, "states[0]"},
      {"log tail too long",
       [&] {
         v1::GetJobLogsRequest r;
         r.set_job_id("job-1");
         r.set_tail(20000);
         v1::GetJobLogsResponse out;
         return training_->GetJobLogs(Ctx(admin_token_).get(), r, &out);
       },
       C::INVALID_ARGUMENT, "tail"},
      {"watch with negative sequence",
       [&] {
         v1::WatchJobRequest r;
         r.set_job_id("job-1");
         r.set_after_sequence(-1);
         auto ctx = Ctx(admin_token_);
         auto reader = training_->WatchJob(ctx.get(), r);
         v1::JobEvent e;
         while (reader->Read(&e)) {
         }
         return reader->Finish();
       },
       C::INVALID_ARGUMENT, "after_sequence"},
      {"generate without model",
       [&] {
         v1::GenerateRequest r;
         r.mutable_list()->add_items()->set_energy_gev(50);
         return Generate(r);
       },
       C::INVALID_ARGUMENT, "model"},
      {"generate without conditions",
       [&] {
         v1::GenerateRequest r;
         r.set_model("calo:1");
         return Generate(r);
       },
       C::INVALID_ARGUMENT, "conditions"},
      {"generate a negative energy",
       [&] {
         v1::GenerateRequest r;
         r.set_model("calo:1");
         r.mutable_list()->add_items()->set_energy_gev(-5);
         return Generate(r);
       },
       C::INVALID_ARGUMENT, "list.items[0].energy_gev"},
      {"generate a NaN energy",
       [&] {
         v1::GenerateRequest r;
         r.set_model("calo:1");
         r.mutable_list()->add_items()->set_energy_gev(50);
         r.mutable_list()->add_items()->set_energy_gev(nan);
         return Generate(r);
       },
       C::INVALID_ARGUMENT, "list.items[1].energy_gev"},
      {"generate too many showers",
       [&] {
         v1::GenerateRequest r;
         r.set_model("calo:1");
         r.mutable_range()->mutable_energy_gev()->set_min(10);
         r.mutable_range()->mutable_energy_gev()->set_max(100);
         r.mutable_range()->set_count(1000000000);
         return Generate(r);
       },
       C::RESOURCE_EXHAUSTED, "range.count"},
      {"generate from an unknown model",
       [&] {
         v1::GenerateRequest r;
         r.set_model("ghost:1");
         r.mutable_list()->add_items()->set_energy_gev(50);
         return Generate(r);
       },
       C::NOT_FOUND, "model"},
      {"model reference with a bad alias",
       [&] {
         v1::GetModelRequest r;
         r.set_model("calo@1bad");
         v1::ModelVersion m;
         return catalog_->GetModel(Ctx(admin_token_).get(), r, &m);
       },
       C::INVALID_ARGUMENT, "alias"},
      {"numeric alias",
       [&] {
         v1::SetAliasRequest r;
         r.set_name("calo");
         r.set_alias("42");
         r.set_version(1);
         v1::ModelVersion m;
         return catalog_->SetAlias(Ctx(admin_token_).get(), r, &m);
       },
       C::INVALID_ARGUMENT, "alias"},
      {"alias to version 0",
       [&] {
         v1::SetAliasRequest r;
         r.set_name("calo");
         r.set_alias("champion");
         v1::ModelVersion m;
         return catalog_->SetAlias(Ctx(admin_token_).get(), r, &m);
       },
       C::INVALID_ARGUMENT, "version"},
      {"unknown model order",
       [&] {
         v1::ListModelsRequest r;
         r.set_order_by("size");
         v1::ListModelsResponse out;
         return catalog_->ListModels(Ctx(admin_token_).get(), r, &out);
       },
       C::INVALID_ARGUMENT, "order_by"},
      {"set no tags",
       [&] {
         v1::SetTagsRequest r;
         r.set_model("calo:1");
         v1::ModelVersion m;
         return catalog_->SetTags(Ctx(admin_token_).get(), r, &m);
       },
       C::INVALID_ARGUMENT, "set"},
      {"get dataset without id",
       [&] {
         v1::Dataset d;
         return datasets_->GetDataset(Ctx(admin_token_).get(), v1::GetDatasetRequest(), &d);
       },
       C::INVALID_ARGUMENT, "dataset_id"},
      {"upload without header",
       [&] {
         v1::UploadDatasetRequest chunk;
         chunk.set_chunk("HDF");
         return Upload({chunk});
       },
       C::INVALID_ARGUMENT, "header"},
      {"upload with a bad name", [&] { return Upload({Header("bad name!", 10)}); },
       C::INVALID_ARGUMENT, "header.name"},
      {"upload chunk over 4 MiB",
       [&] {
         v1::UploadDatasetRequest chunk;
         chunk.set_chunk(std::string(5 << 20, 'x'));
         return Upload({Header("big-chunks", 6 << 20), chunk});
       },
       C::INVALID_ARGUMENT, "chunk"},
      {"upload of size 0", [&] { return Upload({Header("empty", 0)}); }, C::INVALID_ARGUMENT,
       "header.size_bytes"},
      {"upload over the size limit", [&] { return Upload({Header("huge", int64_t{1} << 50)}); },
       C::RESOURCE_EXHAUSTED, "header.size_bytes"},
      {"read a dataset from a negative offset",
       [&] {
         v1::ReadDatasetRequest r;
         r.set_dataset_id("ds-1");
         r.set_offset(-1);
         auto ctx = Ctx(admin_token_);
         auto reader = datasets_->ReadDataset(ctx.get(), r);
         v1::DatasetChunk c;
         while (reader->Read(&c)) {
         }
         return reader->Finish();
       },
       C::INVALID_ARGUMENT, "offset"},
      {"tenant with a bad name",
       [&] {
         v1::CreateTenantRequest r;
         r.set_name("Bad_Name");
         v1::Tenant t;
         return admin_->CreateTenant(Ctx(admin_token_).get(), r, &t);
       },
       C::INVALID_ARGUMENT, "name"},
      {"tenant that exists",
       [&] {
         v1::CreateTenantRequest r;
         r.set_name("admin");
         v1::Tenant t;
         return admin_->CreateTenant(Ctx(admin_token_).get(), r, &t);
       },
       C::ALREADY_EXISTS, "admin"},
      {"token for an unknown tenant",
       [&] {
         v1::CreateTokenRequest r;
         r.set_tenant("nobody");
         v1::CreateTokenResponse t;
         return admin_->CreateToken(Ctx(admin_token_).get(), r, &t);
       },
       C::NOT_FOUND, "nobody"},
      {"revoke without token id",
       [&] {
         v1::RevokeTokenResponse out;
         return admin_->RevokeToken(Ctx(admin_token_).get(), v1::RevokeTokenRequest(), &out);
       },
       C::INVALID_ARGUMENT, "token_id"},
      {"worker with zero slots",
       [&] {
         v1::RegisterRequest r;
         r.set_name("w1");
         r.set_advertise_host("127.0.0.1");
         v1::RegisterResponse out;
         return worker_->Register(Ctx(join_token).get(), r, &out);
       },
       C::INVALID_ARGUMENT, "slots"},
      {"worker without advertise host",
       [&] {
         v1::RegisterRequest r;
         r.set_name("w1");
         r.set_slots(2);
         v1::RegisterResponse out;
         return worker_->Register(Ctx(join_token).get(), r, &out);
       },
       C::INVALID_ARGUMENT, "advertise_host"},
      {"fetch a checkpoint by a malformed hash",
       [&] {
         v1::FetchCheckpointRequest r;
         r.set_sha256("xyz");
         auto ctx = Ctx(worker_credential);
         auto reader = worker_->FetchCheckpoint(ctx.get(), r);
         v1::CheckpointChunk c;
         while (reader->Read(&c)) {
         }
         return reader->Finish();
       },
       C::INVALID_ARGUMENT, "sha256"},
  };
  ASSERT_GE(cases.size(), 30u);
  std::set<std::string> names;
  // A generation endpoint on another host, a unix socket, no port, ports out of range, an option.
  for (const char* endpoint : {"10.9.9.9:7000", "unix:/tmp/gantry.sock", "127.0.0.1", "127.0.0.1:0",
                               "127.0.0.1:70000", "127.0.0.1:--help"}) {
    cases.push_back({absl::StrCat("generation endpoint ", endpoint),
                     [&, endpoint] {
                       v1::RegisterRequest r;
                       r.set_name("w-endpoint");
                       r.set_slots(1);
                       r.set_advertise_host("127.0.0.1");
                       r.set_generation_endpoint(endpoint);
                       v1::RegisterResponse out;
                       return worker_->Register(Ctx(join_token).get(), r, &out);
                     },
                     C::INVALID_ARGUMENT, "generation_endpoint"});
  }
  for (const BadRequest& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_TRUE(names.insert(c.what).second) << "duplicate case";
    const grpc::Status s = c.call();
    EXPECT_EQ(s.error_code(), c.code) << Describe(s);
    EXPECT_NE(s.error_message().find(c.must_mention), std::string::npos)
        << "message does not name \"" << c.must_mention << "\": " << s.error_message();
  }
  // Nothing crashed and nothing was stored; the server still serves.
  EXPECT_EQ(HealthStatus(), 1);
  v1::ListJobsResponse listed;
  ASSERT_TRUE(training_->ListJobs(Ctx(admin_token_).get(), {}, &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 0);
  v1::Job job;
  grpc::Status s = Submit(admin_token_, GoodSpec(), &job);
  EXPECT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
  // keep_best with validation on (the default) is accepted and recorded.
  v1::JobSpec best = GoodSpec();
  best.mutable_checkpoint_policy()->set_keep_best(true);
  v1::Job best_job;
  s = Submit(admin_token_, best, &best_job);
  EXPECT_TRUE(s.ok()) << Describe(s);
  EXPECT_TRUE(best_job.spec().checkpoint_policy().keep_best());
}

// A hostile value in a request (a megabyte long, or with newlines and escape sequences that would
// forge a log line or drive a terminal) is quoted in the error message bounded, escaped and on one
// line; the field violation in the details is bounded the same way.
TEST_F(ServerRequestsTest, HostileValuesAreQuotedBoundedOnOneLine) {
  const std::string megabyte(1 << 20, 'n');
  const std::string forged =
      "x\n2026-11-29T00:00:00.000000Z E gantry-server 1 main.cc:1] forged\r\x1b]0;owned\x07";
  struct Case {
    std::string what;
    std::function<grpc::Status()> call;
    std::string must_mention;
  };
  const std::vector<Case> cases = {
      {"megabyte dataset ref",
       [&] { return SubmitWith([&](v1::JobSpec& s) { s.set_dataset("ds-" + megabyte); }); },
       "spec.dataset"},
      {"megabyte toy MC spec",
       [&] { return SubmitWith([&](v1::JobSpec& s) { s.set_dataset("toymc:" + megabyte); }); },
       "(1048" /* "...(1048xxx more bytes)" */},
      {"forged-line dataset ref",
       [&] { return SubmitWith([&](v1::JobSpec& s) { s.set_dataset(forged); }); },
       "x\\n2026-11-29T00:00:00.000000Z E gantry-server"},
      {"megabyte preset",
       [&] { return SubmitWith([&](v1::JobSpec& s) { s.set_model_preset(megabyte); }); },
       "spec.model_preset"},
      {"forged-line initial model",
       [&] { return SubmitWith([&](v1::JobSpec& s) { s.set_initial_model(forged); }); },
       "model name \"x\\n2026"},
      {"forged-line optimizer",
       [&] {
         return SubmitWith(
             [&](v1::JobSpec& s) { s.mutable_hyper_parameters()->set_optimizer(forged); });
       },
       "\\r\\x1b]0;owned\\x07\" is unknown"},
      {"megabyte dataset name", [&] { return Upload({Header(megabyte, 100)}); }, "header.name"},
      {"forged-line dataset name", [&] { return Upload({Header(forged, 100)}); },
       "dataset name \"x\\n2026"},
      {"megabyte model reference",
       [&] {
         v1::GetModelRequest request;
         request.set_model(megabyte + ":1");
         v1::ModelVersion model;
         return catalog_->GetModel(Ctx(admin_token_).get(), request, &model);
       },
       "more bytes)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const grpc::Status s = c.call();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
    const std::string& message = s.error_message();
    EXPECT_LT(message.size(), 600u) << message.substr(0, 600);
    EXPECT_NE(message.find(c.must_mention), std::string::npos) << message.substr(0, 600);
    for (unsigned char ch : message) {
      ASSERT_TRUE(ch >= 0x20 && ch != 0x7f)
          << "control character " << int{ch} << " in " << message.substr(0, 600);
    }
    EXPECT_LT(s.error_details().size(), 2000u);
  }
  EXPECT_EQ(HealthStatus(), 1);
}

TEST_F(ServerRequestsTest, SubmitGetListAndCancel) {
  const std::string alice = NewTenant("alice");
  v1::Job job;
  grpc::Status s = Submit(alice, GoodSpec(), &job);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(job.id().rfind("job-", 0), 0u) << job.id();
  EXPECT_EQ(job.owner(), "alice");
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job.reason(), "Submitted");
  EXPECT_NE(job.spec().hyper_parameters().seed(), 0u) << "the server chooses and records a seed";
  EXPECT_EQ(job.spec().dataset(), GoodSpec().dataset());

  v1::GetJobRequest get;
  get.set_job_id(job.id());
  v1::Job got;
  ASSERT_TRUE(training_->GetJob(Ctx(alice).get(), get, &got).ok());
  EXPECT_EQ(got.id(), job.id());
  EXPECT_EQ(got.spec().hyper_parameters().seed(), job.spec().hyper_parameters().seed());

  // Idempotent retries with a request id.
  v1::Job first, retry;
  ASSERT_TRUE(Submit(alice, GoodSpec(), &first, "req-42").ok());
  ASSERT_TRUE(Submit(alice, GoodSpec(), &retry, "req-42").ok());
  EXPECT_EQ(first.id(), retry.id());

  v1::JobSpec other = GoodSpec();
  (*other.mutable_labels())["team"] = "tracker";
  v1::Job third;
  ASSERT_TRUE(Submit(alice, other, &third).ok());

  v1::ListJobsRequest list;
  v1::ListJobsResponse listed;
  ASSERT_TRUE(training_->ListJobs(Ctx(alice).get(), list, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 3);
  EXPECT_EQ(listed.jobs(0).id(), third.id()) << "newest first";

  (*list.mutable_label_selector())["team"] = "tracker";
  ASSERT_TRUE(training_->ListJobs(Ctx(alice).get(), list, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).id(), third.id());

  // Pages of 2 then 1.
  list.clear_label_selector();
  list.mutable_page()->set_page_size(2);
  ASSERT_TRUE(training_->ListJobs(Ctx(alice).get(), list, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 2);
  ASSERT_FALSE(listed.next_page_token().empty());
  std::set<std::string> seen{listed.jobs(0).id(), listed.jobs(1).id()};
  list.mutable_page()->set_page_token(listed.next_page_token());
  ASSERT_TRUE(training_->ListJobs(Ctx(alice).get(), list, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  seen.insert(listed.jobs(0).id());
  EXPECT_EQ(seen, (std::set<std::string>{job.id(), first.id(), third.id()}));
  EXPECT_TRUE(listed.next_page_token().empty());

  v1::CancelJobRequest cancel;
  cancel.set_job_id(job.id());
  cancel.set_reason("wrong learning rate");
  v1::Job cancelled;
  s = training_->CancelJob(Ctx(alice).get(), cancel, &cancelled);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_FALSE(cancelled.reason().empty());
  EXPECT_NE(cancelled.message().find("wrong learning rate"), std::string::npos)
      << cancelled.message();
  EXPECT_TRUE(cancelled.has_finished_at());

  // State filter.
  list.Clear();
  list.add_states(v1::JOB_STATE_CANCELLED);
  ASSERT_TRUE(training_->ListJobs(Ctx(alice).get(), list, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).id(), job.id());

  // Cancelling a finished job names its state.
  s = training_->CancelJob(Ctx(alice).get(), cancel, &cancelled);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
  EXPECT_NE(s.error_message().find("CANCELLED"), std::string::npos) << s.error_message();

  // Logs of a job that never ran: none.
  v1::GetJobLogsRequest logs_request;
  logs_request.set_job_id(job.id());
  logs_request.set_rank(-1);
  v1::GetJobLogsResponse logs;
  ASSERT_TRUE(training_->GetJobLogs(Ctx(alice).get(), logs_request, &logs).ok());
  EXPECT_EQ(logs.lines_size(), 0);
}

TEST_F(ServerRequestsTest, WatchJobStreamsTheCancelAndEnds) {
  const std::string alice = NewTenant("alice");
  v1::Job job;
  ASSERT_TRUE(Submit(alice, GoodSpec(), &job).ok());

  v1::WatchJobRequest watch;
  watch.set_job_id(job.id());
  auto ctx = Ctx(alice, 20000);
  auto reader = training_->WatchJob(ctx.get(), watch);
  v1::JobEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.sequence(), 1);
  ASSERT_TRUE(event.has_state_change());
  EXPECT_EQ(event.state_change().to(), v1::JOB_STATE_QUEUED);

  // Cancel from another connection while the watch is open.
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    v1::CancelJobRequest cancel;
    cancel.set_job_id(job.id());
    v1::Job cancelled;
    EXPECT_TRUE(training_->CancelJob(Ctx(alice).get(), cancel, &cancelled).ok());
  });
  ASSERT_TRUE(reader->Read(&event));
  canceller.join();
  EXPECT_EQ(event.sequence(), 2);
  ASSERT_TRUE(event.has_state_change());
  EXPECT_EQ(event.state_change().from(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(event.state_change().to(), v1::JOB_STATE_CANCELLED);
  EXPECT_FALSE(reader->Read(&event)) << "the stream ends once the job is terminal";
  grpc::Status s = reader->Finish();
  EXPECT_TRUE(s.ok()) << Describe(s);

  // A later watch from after_sequence 1 replays only the cancel and ends.
  watch.set_after_sequence(1);
  auto ctx2 = Ctx(alice);
  auto replay = training_->WatchJob(ctx2.get(), watch);
  std::vector<v1::JobEvent> events;
  while (replay->Read(&event)) events.push_back(event);
  EXPECT_TRUE(replay->Finish().ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].state_change().to(), v1::JOB_STATE_CANCELLED);
}

TEST_F(ServerRequestsTest, ClientCancellingAWatchLeavesTheServerHealthy) {
  v1::Job job;
  ASSERT_TRUE(Submit(admin_token_, GoodSpec(), &job).ok());
  v1::WatchJobRequest watch;
  watch.set_job_id(job.id());
  for (int i = 0; i < 5; ++i) {
    auto ctx = Ctx(admin_token_);
    auto reader = training_->WatchJob(ctx.get(), watch);
    v1::JobEvent event;
    ASSERT_TRUE(reader->Read(&event));
    ctx->TryCancel();
    while (reader->Read(&event)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_EQ(HealthStatus(), 1);
  v1::Job got;
  v1::GetJobRequest get;
  get.set_job_id(job.id());
  EXPECT_TRUE(training_->GetJob(Ctx(admin_token_).get(), get, &got).ok());
}

TEST_F(ServerRequestsTest, SigtermEndsOpenWatchStreamsAndExitsCleanly) {
  v1::Job job;
  ASSERT_TRUE(Submit(admin_token_, GoodSpec(), &job).ok());
  v1::WatchJobRequest watch;
  watch.set_job_id(job.id());
  auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  auto training = v1::TrainingService::NewStub(channel);
  auto ctx = Ctx(admin_token_, 30000);
  auto reader = training->WatchJob(ctx.get(), watch);
  v1::JobEvent event;
  ASSERT_TRUE(reader->Read(&event));
  const auto start = std::chrono::steady_clock::now();
  int exit_code = -1;
  std::thread stopper([&] { exit_code = StopServer(); });
  while (reader->Read(&event)) {
  }
  const grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(s);
  reader.reset();
  training.reset();
  channel.reset();
  stopper.join();
  EXPECT_EQ(exit_code, 0);
  // Ended by the shutdown, not by the stream's 30 s deadline (a loaded 2-core machine has taken
  // over 6 s to stop the server, so the bound is well above that and well below the deadline).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace gantry::testing

namespace gantry::testing {
namespace {

// file:// datasets: refused unless the operator allows the tenant (PERMISSION_DENIED) and the path
// lies under an allowed root (INVALID_ARGUMENT, naming the allowed roots); by default both are off.
TEST_F(ServerRequestsTest, FileDatasetsNeedAnAllowedTenantAndRoot) {
  auto submit = [&](const std::string& token, const std::string& dataset) {
    v1::JobSpec spec = GoodSpec();
    spec.set_dataset(dataset);
    v1::Job job;
    return Submit(token, spec, &job);
  };
  const std::string alice = NewTenant("alice");
  grpc::Status off = submit(alice, "file:///data/calo/Ele.h5");
  EXPECT_EQ(off.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(off);

  StartServer({"--file-dataset-roots=/data/calo,/eos/shared", "--file-dataset-tenants=alice"});
  const std::string bob = NewTenant("bob");
  EXPECT_TRUE(submit(alice, "file:///data/calo/run1/Ele.h5").ok());
  EXPECT_TRUE(submit(alice, "file:///eos/shared/Ele.h5").ok());
  grpc::Status other_tenant = submit(bob, "file:///data/calo/run1/Ele.h5");
  EXPECT_EQ(other_tenant.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(other_tenant.error_message().find("bob"), std::string::npos) << Describe(other_tenant);
  for (const char* outside :
       {"file:///etc/shadow", "file:///data/calorimeter/Ele.h5", "file:///data/calo",
        "file:///data/calo/../../etc/shadow", "file:///data/./calo/../secrets/x.h5"}) {
    grpc::Status s = submit(alice, outside);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << outside << Describe(s);
    EXPECT_NE(s.error_message().find("spec.dataset"), std::string::npos) << Describe(s);
  }
  grpc::Status named = submit(alice, "file:///etc/shadow");
  EXPECT_NE(named.error_message().find("/data/calo"), std::string::npos)
      << "the message names the allowed roots: " << Describe(named);

  StartServer({"--file-dataset-roots=/data/calo", "--file-dataset-tenants=*"});
  EXPECT_TRUE(submit(bob, "file:///data/calo/Ele.h5").ok());

  // Directories of a tenant's own: alice reads hers and the shared one she is allowed, bob only
  // his (he is not allowed the shared one), carol none; a refusal names only the caller's.
  StartServer({"--file-dataset-roots=/data/shared", "--file-dataset-tenants=alice",
               "--file-dataset-tenant-roots=alice=/data/alice;bob=/data/bob,/eos/bob"});
  const std::string carol = NewTenant("carol");
  EXPECT_TRUE(submit(alice, "file:///data/alice/Ele.h5").ok());
  EXPECT_TRUE(submit(alice, "file:///data/shared/Ele.h5").ok());
  EXPECT_TRUE(submit(bob, "file:///eos/bob/Ele.h5").ok());
  grpc::Status bob_reads_alice = submit(bob, "file:///data/alice/Ele.h5");
  EXPECT_EQ(bob_reads_alice.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << Describe(bob_reads_alice);
  const std::string allowed =
      bob_reads_alice.error_message().substr(bob_reads_alice.error_message().find("allowed:"));
  EXPECT_EQ(allowed, "allowed: /data/bob, /eos/bob)")
      << "only the caller's directories are named: " << Describe(bob_reads_alice);
  EXPECT_EQ(submit(bob, "file:///data/shared/Ele.h5").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(submit(carol, "file:///data/shared/Ele.h5").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // The worker is told the owner's directories with the assignment (it reads a file only where
  // its realpath lies under one of them and under its own --file-roots).
  v1::CreateTokenResponse join;
  ASSERT_TRUE(admin_->CreateJoinToken(Ctx(admin_token_).get(), {}, &join).ok());
  DriverWorker host(channel_, join.token(), "worker-roots", 4);
  ASSERT_TRUE(host.status().ok()) << Describe(host.status());
  host.set_free_slots(4);
  std::optional<v1::ServerMessage> placed = host.Next();
  while (placed.has_value() &&
         !(placed->has_assignment() && placed->assignment().owner() == "alice")) {
    placed = host.Next();  // acknowledgements, and the jobs submitted above in their order
  }
  ASSERT_TRUE(placed.has_value() && placed->has_assignment());
  EXPECT_EQ(std::vector<std::string>(placed->assignment().file_roots().begin(),
                                     placed->assignment().file_roots().end()),
            (std::vector<std::string>{"/data/shared", "/data/alice"}));
}

// A bad --file-dataset-tenant-roots stops the server at start with the flag named.
TEST_F(ServerRequestsTest, ABadTenantRootsFlagIsRefusedAtStart) {
  for (const char* bad : {"--file-dataset-tenant-roots=alice=relative/dir",
                          "--file-dataset-tenant-roots=/data/alice"}) {
    std::vector<std::string> args = StandardArgs();
    args.push_back(bad);
    std::string output;
    EXPECT_EQ(ServerProcess::RunToExit(args, &output), 2) << bad << ": " << output;
    EXPECT_NE(output.find("--file-dataset-tenant-roots"), std::string::npos) << output;
  }
}

}  // namespace
}  // namespace gantry::testing
