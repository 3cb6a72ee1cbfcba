// StudyRepository against a real PostgreSQL: idempotent creation, tenant scoping, transitions,
// unique trial numbers, trial jobs joined with their jobs rows, conditional trial ends.
#include "storage/study_repository.h"

#include <gtest/gtest.h>

#include <optional>

#include "storage/job_repository.h"
#include "tests/storage/storage_fixture.h"

namespace gantry::storage {
namespace {

namespace v1 = ::gantry::v1;

class StudyRepositoryTest : public StorageFixture {
 protected:
  static v1::StudySpec Spec() {
    v1::StudySpec spec;
    spec.set_display_name("scan");
    spec.mutable_base_job()->set_model_preset("tiny");
    spec.mutable_budget()->set_max_trials(3);
    spec.set_seed(9);
    return spec;
  }
  static google::protobuf::Map<std::string, v1::ParameterValue> Params(double lr) {
    google::protobuf::Map<std::string, v1::ParameterValue> p;
    p["hyper_parameters.learning_rate"].set_number(lr);
    return p;
  }
};

TEST_F(StudyRepositoryTest, CreateGetListAreIdempotentAndTenantScoped) {
  StudyRepository studies(*db_);
  absl::StatusOr<v1::Study> a = studies.Create("alice", Spec(), "req-1");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->state(), v1::STUDY_STATE_RUNNING);
  EXPECT_EQ(a->id().rfind("study-", 0), 0u);
  EXPECT_EQ(a->spec().seed(), 9u);
  absl::StatusOr<v1::Study> again = studies.Create("alice", Spec(), "req-1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), a->id());
  ASSERT_TRUE(studies.Create("alice", Spec(), "").ok());

  EXPECT_TRUE(studies.Get("alice", a->id()).ok());
  EXPECT_TRUE(studies.Get("", a->id()).ok());
  EXPECT_EQ(studies.Get("bob", a->id()).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<Page<v1::Study>> page = studies.List("alice", {}, 1, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->items.size(), 1u);
  EXPECT_FALSE(page->next_page_token.empty());
  absl::StatusOr<Page<v1::Study>> rest = studies.List("alice", {}, 10, page->next_page_token);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->items.size(), 1u);
  EXPECT_EQ(rest->items[0].id(), a->id());  // newest first: a is the older one
  EXPECT_TRUE(studies.List("bob", {}, 10, "")->items.empty());
  EXPECT_EQ(studies.ListActive()->size(), 2u);

  absl::StatusOr<v1::Study> cancelling =
      studies.Transition(a->id(), {v1::STUDY_STATE_RUNNING}, v1::STUDY_STATE_CANCELLING,
                         "CancelRequested", "by alice");
  ASSERT_TRUE(cancelling.ok());
  EXPECT_FALSE(cancelling->has_finished_at());
  absl::StatusOr<v1::Study> done = studies.Transition(
      a->id(), {v1::STUDY_STATE_CANCELLING}, v1::STUDY_STATE_CANCELLED, "Cancelled", "by alice");
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->has_finished_at());
  absl::StatusOr<v1::Study> refused = studies.Transition(a->id(), {v1::STUDY_STATE_RUNNING},
                                                         v1::STUDY_STATE_SUCCEEDED, "Finished", "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("STUDY_STATE_CANCELLED"), std::string::npos);
  EXPECT_EQ(studies.ListActive()->size(), 1u);
  EXPECT_EQ(studies.List("alice", {v1::STUDY_STATE_CANCELLED}, 10, "")->items.size(), 1u);
  // No trial joins a study that ended.
  google::protobuf::Map<std::string, v1::ParameterValue> p;
  p["hyper_parameters.learning_rate"].set_number(1e-3);
  EXPECT_EQ(studies.AddTrial(a->id(), 1, p).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StudyRepositoryTest, TrialsAndTheirJobs) {
  StudyRepository studies(*db_);
  JobRepository jobs(*db_);
  absl::StatusOr<v1::Study> study = studies.Create("alice", Spec(), "");
  ASSERT_TRUE(study.ok());
  ASSERT_TRUE(studies.AddTrial(study->id(), 1, Params(1e-3)).ok());
  EXPECT_EQ(studies.AddTrial(study->id(), 1, Params(2e-3)).code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(studies.AddTrial(study->id(), 2, Params(3e-3)).ok());

  v1::JobSpec spec;
  spec.set_model_preset("tiny");
  spec.set_world_size(2);
  absl::StatusOr<v1::Job> j0 = jobs.Create("alice", spec, "");
  absl::StatusOr<v1::Job> j1 = jobs.Create("alice", spec, "");
  ASSERT_TRUE(j0.ok() && j1.ok());
  ASSERT_TRUE(studies.AddTrialJob(study->id(), 1, 0, j0->id()).ok());
  ASSERT_TRUE(studies.AddTrialJob(study->id(), 1, 0, j0->id()).ok());  // the same job again
  EXPECT_EQ(studies.AddTrialJob(study->id(), 1, 0, j1->id()).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(studies.AddTrialJob(study->id(), 1, 1, j1->id()).ok());
  ASSERT_TRUE(studies.SetFoldObjective(j0->id(), 0.25).ok());
  EXPECT_EQ(studies.SetFoldObjective("job-unknown", 1).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(jobs.Transition(j1->id(), {v1::JOB_STATE_QUEUED}, v1::JOB_STATE_CANCELLED,
                              "CancelledByUser", "")
                  .ok());

  absl::StatusOr<std::optional<StudyRepository::TrialRef>> of = studies.TrialOfJob(j1->id());
  ASSERT_TRUE(of.ok() && of->has_value());
  EXPECT_EQ((*of)->study_id, study->id());
  EXPECT_EQ((*of)->number, 1);

  absl::StatusOr<std::vector<v1::Trial>> trials = studies.ListTrials(study->id());
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 2u);
  const v1::Trial& t1 = (*trials)[0];
  EXPECT_EQ(t1.number(), 1);
  EXPECT_EQ(t1.state(), v1::TRIAL_STATE_RUNNING);
  EXPECT_DOUBLE_EQ(t1.parameters().at("hyper_parameters.learning_rate").number(), 1e-3);
  ASSERT_EQ(t1.folds_size(), 2);
  EXPECT_EQ(t1.folds(0).job_id(), j0->id());
  EXPECT_DOUBLE_EQ(t1.folds(0).objective(), 0.25);
  EXPECT_EQ(t1.folds(0).job_state(), v1::JOB_STATE_QUEUED);
  EXPECT_FALSE(t1.folds(1).has_objective());
  EXPECT_EQ(t1.folds(1).job_state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(t1.device_hours(), 0);  // never ran
  EXPECT_EQ((*trials)[1].folds_size(), 0);

  absl::StatusOr<bool> ended =
      studies.FinishTrial(study->id(), 1, v1::TRIAL_STATE_SUCCEEDED, "ok", 0.3, 0.05);
  ASSERT_TRUE(ended.ok());
  EXPECT_TRUE(*ended);
  ended = studies.FinishTrial(study->id(), 1, v1::TRIAL_STATE_FAILED, "late", std::nullopt, 0);
  ASSERT_TRUE(ended.ok());
  EXPECT_FALSE(*ended);  // already ended: unchanged
  trials = studies.ListTrials(study->id());
  ASSERT_TRUE(trials.ok());
  EXPECT_EQ((*trials)[0].state(), v1::TRIAL_STATE_SUCCEEDED);
  EXPECT_DOUBLE_EQ((*trials)[0].objective(), 0.3);
  EXPECT_DOUBLE_EQ((*trials)[0].objective_stddev(), 0.05);
  EXPECT_TRUE((*trials)[0].has_finished_at());
  EXPECT_FALSE((*trials)[1].has_objective());

  ASSERT_TRUE(studies.SetBest(study->id(), 1, "scan:3").ok());
  absl::StatusOr<v1::Study> got = studies.Get("alice", study->id());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->best_trial(), 1);
  EXPECT_EQ(got->best_model_ref(), "scan:3");
}

}  // namespace
}  // namespace gantry::storage
