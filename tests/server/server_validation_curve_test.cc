// Validation curves against the real gantry-server and PostgreSQL: a rank reports the validation of
// its checkpoints (WorkerService.ReportValidation) only for its own job attempt, with bounded,
// finite metrics and histograms; GetJob shows the curve, GetValidationPoint one point with its
// histograms, WatchJob the points as events, and GetModel the curve of the job that trained it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/server/driver_worker.h"
#include "tests/server/server_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

class ServerValidationCurveTest : public ServerFixture {
 protected:
  // The fixture's server starts with these.
  std::vector<std::string> SetUpServerArgs() const override { return WorkerProtocolArgs(join_); }
  void SetUp() override {
    ServerFixture::SetUp();
    token_ = NewTenant("physics");
  }

  // A one-rank job RUNNING on a fresh worker `name`; keeps the worker and the assignment.
  struct Running {
    v1::Job job;
    std::unique_ptr<DriverWorker> worker;
    v1::Assignment assignment;
  };
  Running StartRunningJob(const std::string& name, const std::string& model_name,
                          const v1::CheckpointPolicy& policy = {}) {
    Running r;
    r.worker = std::make_unique<DriverWorker>(channel_, join_, name, 1);
    EXPECT_TRUE(r.worker->status().ok()) << Describe(r.worker->status());
    v1::JobSpec spec = GoodSpec();
    spec.set_world_size(1);
    spec.set_model_name(model_name);
    *spec.mutable_checkpoint_policy() = policy;
    r.job = SubmitJob(token_, spec);
    std::optional<v1::ServerMessage> m = r.worker->Next();
    EXPECT_TRUE(m && m->has_assignment());
    if (!m || !m->has_assignment()) return r;
    r.assignment = m->assignment();
    r.worker->set_free_slots(0);
    r.worker->RankStatus(r.job.id(), 0, v1::RANK_PHASE_RUNNING);
    EXPECT_EQ(WaitForJob(token_, r.job.id(), v1::JOB_STATE_RUNNING, 10000).state(),
              v1::JOB_STATE_RUNNING);
    return r;
  }

  static v1::ReportValidationRequest Report(const std::string& job_id, int64_t step, double fom) {
    v1::ReportValidationRequest request;
    request.set_job_id(job_id);
    request.set_attempt(0);
    v1::ValidationPoint* point = request.mutable_point();
    point->set_epoch(static_cast<int>(step / 10));
    point->set_step(step);
    (*point->mutable_metrics())["fom"] = fom;
    (*point->mutable_metrics())["mre_sampling_fraction"] = 2 * fom;
    (*point->mutable_metrics())["eprof"] = 3 * fom;
    v1::Histogram* h = point->add_histograms();
    h->set_name("longitudinal_profile");
    h->set_x_label("layer");
    for (int i = 0; i < 25; ++i) {
      h->add_reference(i);
      h->add_generated(i + 1);
    }
    return request;
  }

  // The rank of `r` uploads checkpoints of steps 0, 10, 20, ... scored fom[i] (keep_best), each
  // after its point (Report: fom, eprof 3 fom, a histogram), then sends its result naming the last
  // (the final validation's metrics, a training figure, a histogram "final", BF16 available).
  // Returns the registered version (GetModel) and the checkpoints' sha256 in `shas`.
  v1::ModelVersion TrainAndRegister(const Running& r, const std::vector<double>& fom,
                                    std::vector<std::string>* shas) {
    const std::string id = r.job.id();
    const std::string rank = r.assignment.rank_credential();
    for (size_t i = 0; i < fom.size(); ++i) {
      const int64_t step = 10 * static_cast<int64_t>(i);
      EXPECT_TRUE(Send(rank, Report(id, step, fom[i])).ok());
      const std::string bytes = absl::StrCat(id, " weights of step ", step);
      grpc::Status s = UploadCheckpointAt(channel_, rank, id, bytes, step, 0, fom[i]);
      EXPECT_TRUE(s.ok()) << Describe(s);
      shas->push_back(Sha256Hex(bytes));
    }
    v1::WorkerMessage message;
    v1::JobResult* result = message.mutable_result();
    result->set_success(true);
    result->set_checkpoint_sha256(shas->back());
    result->set_checkpoint_size_bytes(
        static_cast<int64_t>(absl::StrCat(id, " weights of step ", 10 * (fom.size() - 1)).size()));
    (*result->mutable_metrics())["fom"] = fom.back();
    (*result->mutable_metrics())["eprof"] = 3 * fom.back();
    (*result->mutable_metrics())["data_stall_fraction"] = 0.01;
    result->add_histograms()->set_name("final");
    result->mutable_bf16()->set_state(v1::Bf16Check::STATE_AVAILABLE);
    r.worker->Send(id, message);
    const v1::Job job = WaitForJob(token_, id, v1::JOB_STATE_SUCCEEDED, 10000);
    EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString();
    v1::GetModelRequest get;
    get.set_model(job.model_ref());
    v1::ModelVersion model;
    grpc::Status s = catalog_->GetModel(Ctx(token_).get(), get, &model);
    EXPECT_TRUE(s.ok()) << Describe(s);
    return model;
  }

  grpc::Status Send(const std::string& bearer, const v1::ReportValidationRequest& request) {
    v1::ReportValidationResponse response;
    return worker_->ReportValidation(Ctx(bearer).get(), request, &response);
  }

  std::string join_ = "server-validation-join-token-0123456789";
  std::string token_;
};

TEST_F(ServerValidationCurveTest, PointsAreStoredShownWatchedAndCarriedToTheModel) {
  Running r = StartRunningJob("alpha", "curve");
  ASSERT_NE(r.worker, nullptr);
  const std::string id = r.job.id();
  const std::string rank = r.assignment.rank_credential();
  ASSERT_TRUE(Send(rank, Report(id, 20, 0.4)).ok());
  ASSERT_TRUE(Send(rank, Report(id, 10, 0.8)).ok());
  // The worker credential of the worker the rank runs on may report too.
  ASSERT_TRUE(Send(r.worker->credential(), Report(id, 30, 0.2)).ok());

  v1::Job job = GetJob(token_, id);
  ASSERT_EQ(job.validation_curve_size(), 3) << job.DebugString();
  EXPECT_EQ(job.validation_curve(0).step(), 10);
  EXPECT_EQ(job.validation_curve(1).step(), 20);
  EXPECT_EQ(job.validation_curve(2).step(), 30);
  EXPECT_DOUBLE_EQ(job.validation_curve(0).metrics().at("fom"), 0.8);
  EXPECT_EQ(job.validation_curve(0).histograms_size(), 0);
  EXPECT_TRUE(job.validation_curve(0).has_time());

  v1::GetValidationPointRequest get;
  get.set_job_id(id);
  get.set_step(20);
  v1::ValidationPoint point;
  grpc::Status s = training_->GetValidationPoint(Ctx(token_).get(), get, &point);
  ASSERT_TRUE(s.ok()) << Describe(s);
  ASSERT_EQ(point.histograms_size(), 1);
  EXPECT_EQ(point.histograms(0).generated_size(), 25);
  get.set_step(21);
  s = training_->GetValidationPoint(Ctx(token_).get(), get, &point);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  // Another tenant sees no job, hence no point.
  const std::string other = NewTenant("other");
  get.set_step(20);
  s = training_->GetValidationPoint(Ctx(other).get(), get, &point);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);

  // WatchJob replays the points as validation_point events.
  {
    v1::WatchJobRequest watch;
    watch.set_job_id(id);
    auto ctx = Ctx(token_, 2000);
    auto reader = training_->WatchJob(ctx.get(), watch);
    v1::JobEvent event;
    std::vector<int64_t> steps;
    while (steps.size() < 3 && reader->Read(&event)) {
      if (event.has_validation_point()) steps.push_back(event.validation_point().step());
    }
    ctx->TryCancel();
    reader->Finish();
    EXPECT_EQ(steps, (std::vector<int64_t>{20, 10, 30}));
  }

  // The registered model shows the job's curve.
  const std::string sha = UploadCheckpoint(channel_, rank, id, "weights");
  v1::WorkerMessage result;
  result.mutable_result()->set_success(true);
  result.mutable_result()->set_checkpoint_sha256(sha);
  result.mutable_result()->set_checkpoint_size_bytes(7);
  r.worker->Send(id, result);
  job = WaitForJob(token_, id, v1::JOB_STATE_SUCCEEDED, 10000);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString();
  v1::GetModelRequest get_model;
  get_model.set_model(job.model_ref());
  v1::ModelVersion model;
  s = catalog_->GetModel(Ctx(token_).get(), get_model, &model);
  ASSERT_TRUE(s.ok()) << Describe(s);
  ASSERT_EQ(model.validation_curve_size(), 3);
  EXPECT_EQ(model.validation_curve(2).step(), 30);
  EXPECT_DOUBLE_EQ(model.validation_curve(2).metrics().at("eprof"), 3 * 0.2);
  r.worker->RankStatus(id, 0, v1::RANK_PHASE_EXITED);
}

TEST_F(ServerValidationCurveTest, RegisterBestRegistersTheLowestFomCheckpointWithItsPoint) {
  v1::CheckpointPolicy best_policy;
  best_policy.set_keep_best(true);
  best_policy.set_best_metric("sep_mean");
  best_policy.set_register_best(true);
  struct Case {
    const char* name;
    bool register_best;
    std::vector<double> fom;
    size_t registered;  // index of the checkpoint that becomes the model
  };
  const Case cases[] = {
      {"an-earlier-checkpoint", true, {0.6, 0.2, 0.5}, 1},
      {"the-start", true, {0.1, 0.2, 0.5}, 0},
      {"the-final-one-best", true, {0.6, 0.2, 0.1}, 2},
      {"the-final-one-tied", true, {0.6, 0.2, 0.2}, 2},
      {"keep-best-alone", false, {0.6, 0.2, 0.5}, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::CheckpointPolicy policy = best_policy;
    policy.set_register_best(c.register_best);
    Running r = StartRunningJob(c.name, c.name, policy);
    ASSERT_NE(r.worker, nullptr);
    std::vector<std::string> shas;
    const v1::ModelVersion model = TrainAndRegister(r, c.fom, &shas);
    ASSERT_EQ(shas.size(), 3u);
    const int64_t step = 10 * static_cast<int64_t>(c.registered);
    const double fom = c.fom[c.registered];
    EXPECT_EQ(model.checkpoint_sha256(), shas[c.registered]);
    EXPECT_TRUE(model.lineage().has_checkpoint_step());
    EXPECT_EQ(model.lineage().checkpoint_step(), step);
    EXPECT_EQ(model.lineage().checkpoint_epoch(), static_cast<int>(step / 10));
    EXPECT_DOUBLE_EQ(model.metrics().at("fom"), fom);
    EXPECT_DOUBLE_EQ(model.metrics().at("eprof"), 3 * fom);
    EXPECT_DOUBLE_EQ(model.metrics().at("data_stall_fraction"), 0.01) << "training figures stay";
    ASSERT_EQ(model.histograms_size(), 1);
    if (c.registered == 2) {  // the final validation's result, as without register_best
      EXPECT_EQ(model.histograms(0).name(), "final");
      EXPECT_EQ(model.bf16().state(), v1::Bf16Check::STATE_AVAILABLE);
    } else {
      EXPECT_EQ(model.histograms(0).name(), "longitudinal_profile") << "the point's histograms";
      EXPECT_EQ(model.histograms(0).generated_size(), 25);
      EXPECT_EQ(model.bf16().state(), v1::Bf16Check::STATE_NOT_CHECKED);
      EXPECT_NE(model.bf16().reason().find(absl::StrCat("step ", step)), std::string::npos)
          << model.bf16().reason();
    }
    EXPECT_EQ(model.validation_curve_size(), 3) << "the whole curve, whichever is registered";
    r.worker->RankStatus(r.job.id(), 0, v1::RANK_PHASE_EXITED);
  }
}

TEST_F(ServerValidationCurveTest, AReportIsScopedToTheReportersJobAttempt) {
  Running a = StartRunningJob("alpha", "a");
  Running b = StartRunningJob("beta", "b");
  ASSERT_NE(a.worker, nullptr);
  ASSERT_NE(b.worker, nullptr);
  const std::string rank_a = a.assignment.rank_credential();
  // A rank of job A reports for job B: refused, as its checkpoint uploads would be.
  grpc::Status s = Send(rank_a, Report(b.job.id(), 10, 0.5));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  // For another attempt of its own job: refused.
  v1::ReportValidationRequest later = Report(a.job.id(), 10, 0.5);
  later.set_attempt(1);
  s = Send(rank_a, later);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  // A worker with no rank of job B: refused.
  s = Send(a.worker->credential(), Report(b.job.id(), 10, 0.5));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << Describe(s);
  EXPECT_NE(s.error_message().find("no ranks on this worker"), std::string::npos)
      << s.error_message();
  // A tenant token or the join token is no worker's.
  s = Send(token_, Report(a.job.id(), 10, 0.5));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  s = Send(join_, Report(a.job.id(), 10, 0.5));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);
  EXPECT_EQ(GetJob(token_, b.job.id()).validation_curve_size(), 0);
  EXPECT_EQ(GetJob(token_, a.job.id()).validation_curve_size(), 0);
}

TEST_F(ServerValidationCurveTest, BadMetricsAndOversizedHistogramsAreInvalid) {
  Running r = StartRunningJob("alpha", "bad");
  ASSERT_NE(r.worker, nullptr);
  const std::string id = r.job.id();
  const std::string rank = r.assignment.rank_credential();
  auto expect_invalid = [&](const v1::ReportValidationRequest& request, const std::string& field) {
    grpc::Status s = Send(rank, request);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
    EXPECT_NE(s.error_message().find(field), std::string::npos) << s.error_message();
  };
  v1::ReportValidationRequest nan = Report(id, 10, 0.5);
  (*nan.mutable_point()->mutable_metrics())["eprof"] = std::nan("");
  expect_invalid(nan, "point.metrics[eprof]");
  v1::ReportValidationRequest inf = Report(id, 10, 0.5);
  (*inf.mutable_point()->mutable_metrics())["pos"] = std::numeric_limits<double>::infinity();
  expect_invalid(inf, "finite");
  v1::ReportValidationRequest many = Report(id, 10, 0.5);
  for (int i = 0; i < 200; ++i)
    (*many.mutable_point()->mutable_metrics())["m" + std::to_string(i)] = i;
  expect_invalid(many, "at most 128");
  v1::ReportValidationRequest long_name = Report(id, 10, 0.5);
  (*long_name.mutable_point()->mutable_metrics())[std::string(65, 'x')] = 1;
  expect_invalid(long_name, "point.metrics");
  v1::ReportValidationRequest odd_name = Report(id, 10, 0.5);
  (*odd_name.mutable_point()->mutable_metrics())["fom; DROP TABLE jobs"] = 1;
  expect_invalid(odd_name, "[A-Za-z0-9_.-]");
  v1::ReportValidationRequest empty = Report(id, 10, 0.5);
  empty.mutable_point()->clear_metrics();
  expect_invalid(empty, "point.metrics");
  v1::ReportValidationRequest negative = Report(id, -1, 0.5);
  expect_invalid(negative, "point.step");
  // 5 MiB of histograms (inside the 16 MiB message limit, past the 4 MiB per point).
  v1::ReportValidationRequest big = Report(id, 10, 0.5);
  for (int k = 0; k < 8; ++k) {
    v1::Histogram* h = big.mutable_point()->add_histograms();
    h->set_name("big");
    for (int i = 0; i < 80000; ++i) h->add_generated(i);
  }
  expect_invalid(big, "point.histograms");
  v1::ReportValidationRequest bins = Report(id, 10, 0.5);
  v1::Histogram* wide = bins.mutable_point()->add_histograms();
  wide->set_name("wide");
  for (int i = 0; i < 100001; ++i) wide->add_reference(0);
  expect_invalid(bins, "bins");
  EXPECT_EQ(GetJob(token_, id).validation_curve_size(), 0) << "nothing refused was stored";
  // A good one still goes through.
  EXPECT_TRUE(Send(rank, Report(id, 10, 0.5)).ok());
  EXPECT_EQ(GetJob(token_, id).validation_curve_size(), 1);
}

}  // namespace
}  // namespace gantry::testing
