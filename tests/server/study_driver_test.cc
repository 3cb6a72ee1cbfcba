// StudyDriver's early stopping on a real PostgreSQL, in process and without workers: a pass
// (RunOnce) submits the trials, the test moves their jobs to RUNNING and stores validation points
// the way ReportValidation does (JobRepository::RecordValidationPoint), and the next pass stops the
// trial that is clearly worse than the median of the others (its job CANCELLING with a message
// saying so, the trial STOPPED) while the good trials keep running; with too few trials or points
// for the rule nothing stops; ASHA keeps the best third at its first rung; a stopped trial frees
// its slot for a new one in the same pass.
#include "server/coordinator/study_driver.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gantry/v1/studies.pb.h"
#include "server/coordinator/job_submitter.h"
#include "server/platform/backend.h"
#include "server/requests/study_requests.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_database.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;

constexpr char kTenant[] = "physics";

class StudyDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions options;
    options.db.dsn = db_.dsn();
    options.data_dir = dir_.path() + "/data";
    absl::StatusOr<std::unique_ptr<server::Backend>> backend = server::Backend::Create(options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    ASSERT_TRUE(backend_->tenants->CreateTenant(kTenant, false).ok());
    submitter_ = std::make_unique<server::JobSubmitter>(
        *backend_->jobs, *backend_->datasets, *backend_->models, *backend_->pools,
        *backend_->quotas, backend_->options.file_datasets);
    // interval 0: no thread, the test runs each pass itself.
    driver_ = std::make_unique<server::StudyDriver>(*backend_->studies, *backend_->jobs,
                                                    *backend_->models, *backend_, *submitter_,
                                                    absl::ZeroDuration());
  }

  // `trials` trials of one job each (no folds), all started at once, with `rule` (the median rule
  // unless told) after `min_points` validation points.
  static v1::StudySpec Spec(int trials,
                            v1::EarlyStopping::Rule rule = v1::EarlyStopping::RULE_MEDIAN,
                            int min_points = 2) {
    v1::StudySpec spec;
    spec.set_display_name("early stopping");
    v1::JobSpec* job = spec.mutable_base_job();
    job->set_model_preset("tiny");
    job->set_dataset("toymc:layout=25,events=64,seed=3,emin=10,emax=100");
    job->mutable_hyper_parameters()->set_epochs(4);
    job->mutable_hyper_parameters()->set_batch_per_rank(8);
    job->mutable_hyper_parameters()->set_learning_rate(1e-3);
    job->mutable_checkpoint_policy()->set_every_epochs(1);
    job->set_world_size(1);
    v1::SearchParameter* lr = spec.add_parameters();
    lr->set_name("hyper_parameters.learning_rate");
    lr->set_kind(v1::SearchParameter::KIND_LOG_CONTINUOUS);
    lr->set_min(1e-4);
    lr->set_max(1e-2);
    spec.mutable_budget()->set_max_trials(trials);
    spec.mutable_budget()->set_max_parallel_trials(trials);
    spec.mutable_early_stopping()->set_rule(rule);
    spec.mutable_early_stopping()->set_min_points(min_points);
    spec.mutable_objective()->set_metric("fom");  // lower is better
    spec.set_seed(7);
    return spec;
  }

  // Stores the study as CreateStudy does after its checks, runs the first pass (which submits every
  // trial's job) and moves each job to RUNNING as placement would.
  v1::Study StartStudy(const v1::StudySpec& spec) {
    EXPECT_TRUE(server::ValidateStudySpec(spec).ok()) << server::ValidateStudySpec(spec);
    absl::StatusOr<v1::Study> study = backend_->studies->Create(kTenant, spec, "");
    EXPECT_TRUE(study.ok()) << study.status();
    if (!study.ok()) return {};
    EXPECT_TRUE(driver_->RunOnce().ok());
    const std::vector<v1::Trial> trials = Trials(study->id());
    EXPECT_EQ(static_cast<int>(trials.size()), spec.budget().max_parallel_trials());
    for (const v1::Trial& trial : trials) {
      EXPECT_EQ(trial.state(), v1::TRIAL_STATE_RUNNING) << trial.message();
      EXPECT_EQ(trial.folds_size(), 1);
      for (const v1::FoldResult& fold : trial.folds()) {
        EXPECT_TRUE(backend_->jobs
                        ->Transition(fold.job_id(), {v1::JOB_STATE_QUEUED}, v1::JOB_STATE_PLACING,
                                     "Placing", "test")
                        .ok());
        EXPECT_TRUE(backend_->jobs
                        ->Transition(fold.job_id(), {v1::JOB_STATE_PLACING}, v1::JOB_STATE_RUNNING,
                                     "Running", "test")
                        .ok());
      }
    }
    return *study;
  }

  std::vector<v1::Trial> Trials(const std::string& study_id) {
    absl::StatusOr<std::vector<v1::Trial>> trials = backend_->studies->ListTrials(study_id);
    EXPECT_TRUE(trials.ok()) << trials.status();
    return trials.ok() ? *trials : std::vector<v1::Trial>{};
  }

  v1::Job Job(const std::string& id) {
    absl::StatusOr<v1::Job> job = backend_->jobs->Get("", id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : v1::Job{};
  }

  // The validation points a worker reports at its checkpoints (epochs 1, 2, ...), stored as
  // WorkerService.ReportValidation stores them.
  void Report(const v1::Trial& trial, const std::vector<double>& foms) {
    ASSERT_EQ(trial.folds_size(), 1);
    const std::string& job_id = trial.folds(0).job_id();
    const v1::Job job = Job(job_id);
    int64_t step = 0;
    for (double fom : foms) {
      step += 8;
      v1::ValidationPoint point;
      point.set_step(step);
      point.set_epoch(static_cast<int32_t>(step / 8));
      (*point.mutable_metrics())["fom"] = fom;
      absl::Status s = backend_->jobs->RecordValidationPoint(job_id, job.attempt(), point);
      ASSERT_TRUE(s.ok()) << s;
    }
  }

  TestDatabase db_;
  TempDir dir_;
  std::unique_ptr<server::Backend> backend_;
  std::unique_ptr<server::JobSubmitter> submitter_;
  std::unique_ptr<server::StudyDriver> driver_;
};

TEST_F(StudyDriverTest, MedianRuleStopsTheTrialWorseThanTheOthersAndKeepsTheRest) {
  const v1::Study study = StartStudy(Spec(4));
  std::vector<v1::Trial> trials = Trials(study.id());
  ASSERT_EQ(trials.size(), 4u);
  // Three trials close together; the fourth far worse at the same points.
  Report(trials[0], {0.50, 0.40});
  Report(trials[1], {0.60, 0.45});
  Report(trials[2], {0.55, 0.42});
  Report(trials[3], {3.00, 2.90});

  ASSERT_TRUE(driver_->RunOnce().ok());
  trials = Trials(study.id());
  ASSERT_EQ(trials.size(), 4u);  // the budget is spent: no new trial replaces the stopped one
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(trials[i].state(), v1::TRIAL_STATE_RUNNING) << i << ": " << trials[i].message();
    EXPECT_EQ(Job(trials[i].folds(0).job_id()).state(), v1::JOB_STATE_RUNNING) << i;
  }
  const v1::Trial& poor = trials[3];
  EXPECT_EQ(poor.state(), v1::TRIAL_STATE_STOPPED) << poor.message();
  EXPECT_EQ(poor.message().rfind("stopped early: median rule", 0), 0u) << poor.message();
  EXPECT_NE(poor.message().find("2.9"), std::string::npos) << poor.message();
  const v1::Job job = Job(poor.folds(0).job_id());
  EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLING);
  EXPECT_EQ(job.message().rfind("stopped early: median rule", 0), 0u) << job.message();

  // The worker ends the job; the trial stays STOPPED, the others still run, the study goes on.
  ASSERT_TRUE(backend_->jobs
                  ->Transition(job.id(), {v1::JOB_STATE_CANCELLING}, v1::JOB_STATE_CANCELLED,
                               "Cancelled", "ranks exited")
                  .ok());
  ASSERT_TRUE(driver_->RunOnce().ok());
  trials = Trials(study.id());
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[3].state(), v1::TRIAL_STATE_STOPPED);
  EXPECT_EQ(trials[3].message().rfind("stopped early: median rule", 0), 0u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(trials[i].state(), v1::TRIAL_STATE_RUNNING) << i << ": " << trials[i].message();
  }
  absl::StatusOr<v1::Study> now = backend_->studies->Get("", study.id());
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->state(), v1::STUDY_STATE_RUNNING) << now->message();
}

TEST_F(StudyDriverTest, TooFewTrialsForTheMedianRuleStopNothing) {
  // The median needs 3 other trials at the step; with 3 trials each has only 2.
  const v1::Study study = StartStudy(Spec(3));
  std::vector<v1::Trial> trials = Trials(study.id());
  ASSERT_EQ(trials.size(), 3u);
  Report(trials[0], {0.50, 0.40});
  Report(trials[1], {0.60, 0.45});
  Report(trials[2], {3.00, 2.90});

  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_TRUE(driver_->RunOnce().ok());
    trials = Trials(study.id());
    ASSERT_EQ(trials.size(), 3u);
    for (const v1::Trial& trial : trials) {
      EXPECT_EQ(trial.state(), v1::TRIAL_STATE_RUNNING)
          << trial.number() << ": " << trial.message();
      EXPECT_EQ(Job(trial.folds(0).job_id()).state(), v1::JOB_STATE_RUNNING) << trial.number();
    }
  }
}

TEST_F(StudyDriverTest, NoTrialStopsBeforeMinPoints) {
  // One point each, min_points 2: the poor trial has not reached the grace period.
  const v1::Study study = StartStudy(Spec(4));
  std::vector<v1::Trial> trials = Trials(study.id());
  ASSERT_EQ(trials.size(), 4u);
  Report(trials[0], {0.50});
  Report(trials[1], {0.60});
  Report(trials[2], {0.55});
  Report(trials[3], {3.00});
  ASSERT_TRUE(driver_->RunOnce().ok());
  for (const v1::Trial& trial : Trials(study.id())) {
    EXPECT_EQ(trial.state(), v1::TRIAL_STATE_RUNNING) << trial.number() << ": " << trial.message();
  }
}

TEST_F(StudyDriverTest, AshaKeepsTheBestThirdAtTheFirstRung) {
  // ASHA halving by 3 with its first rung at the first point: of 6 trials, the 2 best continue.
  const v1::Study study = StartStudy(Spec(6, v1::EarlyStopping::RULE_ASHA, 1));
  std::vector<v1::Trial> trials = Trials(study.id());
  ASSERT_EQ(trials.size(), 6u);
  const std::vector<double> foms = {0.60, 0.40, 0.70, 0.45, 3.00, 0.65};
  for (size_t i = 0; i < trials.size(); ++i) Report(trials[i], {foms[i]});
  ASSERT_TRUE(driver_->RunOnce().ok());
  trials = Trials(study.id());
  ASSERT_EQ(trials.size(), 6u);
  for (size_t i = 0; i < trials.size(); ++i) {
    const v1::Job job = Job(trials[i].folds(0).job_id());
    if (i == 1 || i == 3) {
      EXPECT_EQ(trials[i].state(), v1::TRIAL_STATE_RUNNING) << i << ": " << trials[i].message();
      EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING) << i;
    } else {
      EXPECT_EQ(trials[i].state(), v1::TRIAL_STATE_STOPPED) << i << ": " << trials[i].message();
      EXPECT_EQ(trials[i].message().rfind("stopped early: ASHA", 0), 0u) << trials[i].message();
      EXPECT_NE(trials[i].message().find("not among the best 2 of 6"), std::string::npos)
          << trials[i].message();
      EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLING) << i;
      EXPECT_EQ(job.message().rfind("stopped early: ASHA", 0), 0u) << job.message();
    }
  }
}

TEST_F(StudyDriverTest, AStoppedTrialFreesItsSlotForANewTrialInTheSamePass) {
  v1::StudySpec spec = Spec(4);
  spec.mutable_budget()->set_max_trials(5);
  const v1::Study study = StartStudy(spec);
  std::vector<v1::Trial> trials = Trials(study.id());
  ASSERT_EQ(trials.size(), 4u);
  Report(trials[0], {0.50, 0.40});
  Report(trials[1], {3.00, 2.90});
  Report(trials[2], {0.55, 0.42});
  Report(trials[3], {0.60, 0.45});
  ASSERT_TRUE(driver_->RunOnce().ok());
  trials = Trials(study.id());
  ASSERT_EQ(trials.size(), 5u);
  EXPECT_EQ(trials[1].state(), v1::TRIAL_STATE_STOPPED) << trials[1].message();
  for (int i : {0, 2, 3, 4}) {
    EXPECT_EQ(trials[i].state(), v1::TRIAL_STATE_RUNNING) << i << ": " << trials[i].message();
  }
  ASSERT_EQ(trials[4].folds_size(), 1);
  EXPECT_EQ(Job(trials[4].folds(0).job_id()).state(), v1::JOB_STATE_QUEUED);
}

}  // namespace
}  // namespace gantry::testing
