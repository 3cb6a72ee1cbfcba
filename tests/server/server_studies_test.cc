// StudyService against the real gantry-server and PostgreSQL, without workers: every bad request
// gets INVALID_ARGUMENT (or the right code) with a message naming the field; a study is stored with
// its resolved seed and objective, its first trials are submitted as ordinary jobs labelled with
// the study (capped at max_parallel_trials), another tenant cannot see it, and CancelStudy ends it
// and every trial job.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/server_fixture.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

class ServerStudiesTest : public ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    // A quick driver. The port is the kernel's choice: a fixed one in the ephemeral range may be
    // taken by another test's socket.
    StopServer();
    StartServer({"--study-interval-ms=200"});
    token_ = NewTenant("physics");
  }

  static v1::StudySpec Spec() {
    v1::StudySpec spec;
    spec.set_display_name("lr scan");
    v1::JobSpec* job = spec.mutable_base_job();
    *job = GoodSpec();
    job->set_world_size(1);
    job->set_dataset("toymc:layout=25,events=40,seed=3,emin=10,emax=100");
    v1::SearchParameter* lr = spec.add_parameters();
    lr->set_name("hyper_parameters.learning_rate");
    lr->set_kind(v1::SearchParameter::KIND_LOG_CONTINUOUS);
    lr->set_min(1e-4);
    lr->set_max(1e-2);
    v1::SearchParameter* latent = spec.add_parameters();
    latent->set_name("model_overrides.latent_size");
    latent->set_kind(v1::SearchParameter::KIND_CATEGORICAL);
    latent->add_choices("64");
    latent->add_choices("128");
    spec.mutable_budget()->set_max_trials(4);
    spec.mutable_budget()->set_max_parallel_trials(2);
    spec.set_folds(2);
    return spec;
  }

  grpc::Status Create(const v1::StudySpec& spec, v1::Study* study, const std::string& token = "") {
    v1::CreateStudyRequest request;
    *request.mutable_spec() = spec;
    return studies_->CreateStudy(Ctx(token.empty() ? token_ : token).get(), request, study);
  }

  // Creates `spec` changed by `edit`: INVALID_ARGUMENT whose message contains `field` and `words`.
  void ExpectInvalid(const std::function<void(v1::StudySpec&)>& edit, const std::string& field,
                     const std::string& words) {
    v1::StudySpec spec = Spec();
    edit(spec);
    v1::Study study;
    grpc::Status s = Create(spec, &study);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field << ": " << Describe(s);
    EXPECT_NE(s.error_message().find(field), std::string::npos) << s.error_message();
    EXPECT_NE(s.error_message().find(words), std::string::npos) << s.error_message();
  }

  std::vector<v1::Trial> Trials(const std::string& id) {
    v1::ListTrialsRequest request;
    request.set_study_id(id);
    v1::ListTrialsResponse response;
    grpc::Status s = studies_->ListTrials(Ctx(token_).get(), request, &response);
    EXPECT_TRUE(s.ok()) << Describe(s);
    return {response.trials().begin(), response.trials().end()};
  }

  std::vector<v1::Job> StudyJobs(const std::string& id) {
    v1::ListJobsRequest request;
    (*request.mutable_label_selector())["study"] = id;
    v1::ListJobsResponse response;
    grpc::Status s = training_->ListJobs(Ctx(token_).get(), request, &response);
    EXPECT_TRUE(s.ok()) << Describe(s);
    return {response.jobs().begin(), response.jobs().end()};
  }

  std::string token_;
};

TEST_F(ServerStudiesTest, BadStudiesAreRefusedWithTheFieldToChange) {
  using P = v1::SearchParameter;
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_parameters(0)->set_max(1e-4); },
                "spec.parameters[0].max", "empty or inverted");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_parameters(0)->set_max(1e-5); },
                "spec.parameters[0].max", "not above min");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_parameters(0)->set_min(0); },
                "spec.parameters[0].min", "LOG_CONTINUOUS range needs min > 0");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_parameters(0)->set_name("learning_rate"); },
                "spec.parameters[0].name", "hyper_parameters.learning_rate");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_parameters(0)->set_name("spec.world_size"); },
                "spec.parameters[0].name", "not a searchable JobSpec field");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_parameters(1)->clear_choices(); },
                "spec.parameters[1].choices", "is empty");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_parameters(1)->add_choices("big"); },
                "spec.parameters[1].choices", "\"big\" is not a number");
  ExpectInvalid(
      [](v1::StudySpec& s) {
        P* p = s.add_parameters();
        p->set_name("hyper_parameters.batch_per_rank");
        p->set_kind(P::KIND_INTEGER);
        p->set_min(1);
        p->set_max(100000);
      },
      "spec.parameters[2]", "batch_per_rank: is 100000");
  ExpectInvalid([](v1::StudySpec& s) { s.clear_parameters(); }, "spec.parameters",
                "at least one parameter");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_budget()->set_max_trials(0); },
                "spec.budget.max_trials", "is 0");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_budget()->set_max_parallel_trials(0); },
                "spec.budget.max_parallel_trials", "is 0");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_budget()->set_max_parallel_trials(5); },
                "spec.budget.max_parallel_trials", "1..max_trials (4)");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_budget()->set_max_device_hours(-1); },
                "spec.budget.max_device_hours", "hours >= 0");
  ExpectInvalid([](v1::StudySpec& s) { s.set_folds(1); }, "spec.folds", "2..20");
  // 40 events cannot fill 30 folds... but 30 is above the limit anyway; 12 folds of 10 events:
  ExpectInvalid(
      [](v1::StudySpec& s) {
        s.mutable_base_job()->set_dataset("toymc:layout=25,events=10,seed=3,emin=10,emax=100");
        s.set_folds(12);
      },
      "spec.folds", "has only 10 events");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_base_job()->set_world_size(0); },
                "spec.base_job.world_size", "is missing");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_objective()->set_metric("f o m"); },
                "spec.objective.metric", "not a metric name");
  ExpectInvalid(
      [](v1::StudySpec& s) {
        s.mutable_early_stopping()->set_rule(v1::EarlyStopping::RULE_MEDIAN);
      },
      "spec.early_stopping", "every_epochs or every_steps");
  ExpectInvalid(
      [](v1::StudySpec& s) { s.mutable_base_job()->mutable_validation()->set_disabled(true); },
      "spec.base_job.validation.disabled", "validation metrics");
  ExpectInvalid([](v1::StudySpec& s) { s.mutable_base_job()->mutable_data_split()->set_folds(2); },
                "spec.base_job.data_split", "spec.folds");

  v1::Study study;
  v1::CreateStudyRequest empty;
  grpc::Status s = studies_->CreateStudy(Ctx(token_).get(), empty, &study);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::GetStudyRequest get;
  get.set_study_id("job-123");
  s = studies_->GetStudy(Ctx(token_).get(), get, &study);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  get.set_study_id("study-0000");
  s = studies_->GetStudy(Ctx(token_).get(), get, &study);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  s = studies_->GetStudy(Ctx("").get(), get, &study);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << Describe(s);

  // A job's own data split is checked as well.
  v1::JobSpec job = GoodSpec();
  job.set_dataset("toymc:layout=25,events=10,seed=3,emin=10,emax=100");
  job.mutable_data_split()->set_folds(12);
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = job;
  v1::Job submitted;
  s = training_->SubmitJob(Ctx(token_).get(), submit, &submitted);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_NE(s.error_message().find("spec.data_split.folds: is 12 but"), std::string::npos)
      << s.error_message();
  submit.mutable_spec()->mutable_data_split()->set_folds(3);
  submit.mutable_spec()->mutable_data_split()->set_validation_fold(3);
  s = training_->SubmitJob(Ctx(token_).get(), submit, &submitted);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_NE(s.error_message().find("spec.data_split.validation_fold"), std::string::npos);
}

TEST_F(ServerStudiesTest, AStudySubmitsItsTrialsAsJobsAndCancelEndsThem) {
  v1::Study study;
  grpc::Status s = Create(Spec(), &study);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(study.state(), v1::STUDY_STATE_RUNNING);
  EXPECT_NE(study.spec().seed(), 0u);
  EXPECT_EQ(study.spec().objective().metric(), "fom");
  EXPECT_EQ(study.owner(), "physics");

  // Without workers the jobs stay queued: the first 2 trials (max_parallel_trials), 2 folds each.
  std::vector<v1::Job> jobs;
  const auto until = steady_clock::now() + std::chrono::seconds(20);
  while (steady_clock::now() < until) {
    jobs = StudyJobs(study.id());
    if (jobs.size() >= 4) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  std::this_thread::sleep_for(milliseconds(600));  // three more driver passes: no more trials
  jobs = StudyJobs(study.id());
  ASSERT_EQ(jobs.size(), 4u) << server_->Stderr();
  std::vector<v1::Trial> trials = Trials(study.id());
  ASSERT_EQ(trials.size(), 2u);
  std::set<std::string> fold_jobs;
  for (const v1::Trial& t : trials) {
    EXPECT_EQ(t.state(), v1::TRIAL_STATE_RUNNING);
    ASSERT_EQ(t.folds_size(), 2);
    ASSERT_EQ(t.parameters().size(), 2u);
    const double lr = t.parameters().at("hyper_parameters.learning_rate").number();
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1e-2);
    const std::string latent = t.parameters().at("model_overrides.latent_size").category();
    EXPECT_TRUE(latent == "64" || latent == "128") << latent;
    for (const v1::FoldResult& f : t.folds()) {
      fold_jobs.insert(f.job_id());
      v1::Job job = GetJob(token_, f.job_id());
      EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
      // The trial's values are in the job, with the fold's data split and the study's labels.
      EXPECT_DOUBLE_EQ(job.spec().hyper_parameters().learning_rate(), lr);
      EXPECT_EQ(std::to_string(job.spec().model_overrides().latent_size()), latent);
      EXPECT_EQ(job.spec().data_split().folds(), 2);
      EXPECT_EQ(job.spec().data_split().validation_fold(), f.fold());
      EXPECT_EQ(job.spec().data_split().seed(), study.spec().seed());
      EXPECT_EQ(job.spec().labels().at("study"), study.id());
      EXPECT_EQ(job.spec().labels().at("study-trial"), std::to_string(t.number()));
      EXPECT_EQ(job.spec().labels().at("team"), "calo");
      EXPECT_EQ(job.spec().priority(), 5);
    }
  }
  EXPECT_EQ(fold_jobs.size(), 4u);

  v1::GetStudyRequest get;
  get.set_study_id(study.id());
  s = studies_->GetStudy(Ctx(token_).get(), get, &study);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(study.trials_started(), 2);
  EXPECT_EQ(study.trials_running(), 2);

  // Another tenant sees nothing.
  const std::string other = NewTenant("other");
  v1::Study hidden;
  s = studies_->GetStudy(Ctx(other).get(), get, &hidden);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  v1::ListStudiesResponse listed;
  s = studies_->ListStudies(Ctx(other).get(), {}, &listed);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(listed.studies_size(), 0);
  v1::CancelStudyRequest cancel_other;
  cancel_other.set_study_id(study.id());
  s = studies_->CancelStudy(Ctx(other).get(), cancel_other, &hidden);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << Describe(s);
  s = studies_->ListStudies(Ctx(token_).get(), {}, &listed);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(listed.studies_size(), 1);
  EXPECT_EQ(listed.studies(0).id(), study.id());

  // Cancel: the queued jobs end at once, the trials and the study follow.
  v1::CancelStudyRequest cancel;
  cancel.set_study_id(study.id());
  cancel.set_reason("enough");
  s = studies_->CancelStudy(Ctx(token_).get(), cancel, &study);
  ASSERT_TRUE(s.ok()) << Describe(s);
  for (const v1::Job& job : StudyJobs(study.id())) {
    EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED) << job.id();
  }
  const auto cancel_until = steady_clock::now() + std::chrono::seconds(10);
  while (study.state() != v1::STUDY_STATE_CANCELLED && steady_clock::now() < cancel_until) {
    std::this_thread::sleep_for(milliseconds(100));
    ASSERT_TRUE(studies_->GetStudy(Ctx(token_).get(), get, &study).ok());
  }
  EXPECT_EQ(study.state(), v1::STUDY_STATE_CANCELLED) << study.DebugString();
  EXPECT_NE(study.message().find("enough"), std::string::npos);
  for (const v1::Trial& t : Trials(study.id())) {
    EXPECT_EQ(t.state(), v1::TRIAL_STATE_CANCELLED) << t.number();
  }
  EXPECT_EQ(StudyJobs(study.id()).size(), 4u);  // nothing new after the cancel
  s = studies_->CancelStudy(Ctx(token_).get(), cancel, &study);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << Describe(s);
}

}  // namespace
}  // namespace gantry::testing
