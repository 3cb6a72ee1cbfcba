// The pure parts of studies in the server: writing a trial's values into its job spec, the
// spec checks that need no database, and the mean, spread and best trial of a study.
#include "server/requests/study_requests.h"

#include <gtest/gtest.h>

#include <cmath>

#include "server/coordinator/study_summary.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

v1::ParameterValue Number(double v) {
  v1::ParameterValue p;
  p.set_number(v);
  return p;
}
v1::ParameterValue Integer(int64_t v) {
  v1::ParameterValue p;
  p.set_integer(v);
  return p;
}
v1::ParameterValue Category(const std::string& v) {
  v1::ParameterValue p;
  p.set_category(v);
  return p;
}

TEST(StudyRequestsTest, ParametersAreWrittenIntoTheirJobSpecFields) {
  v1::JobSpec spec;
  ASSERT_TRUE(ApplyParameter("hyper_parameters.learning_rate", Number(3e-4), &spec).ok());
  ASSERT_TRUE(ApplyParameter("model_overrides.latent_size", Integer(128), &spec).ok());
  ASSERT_TRUE(ApplyParameter("hyper_parameters.batch_per_rank", Category("32"), &spec).ok());
  ASSERT_TRUE(ApplyParameter("hyper_parameters.optimizer", Category("rmsprop"), &spec).ok());
  ASSERT_TRUE(ApplyParameter("hyper_parameters.loss_weights.energy", Number(0.2), &spec).ok());
  EXPECT_DOUBLE_EQ(spec.hyper_parameters().learning_rate(), 3e-4);
  EXPECT_EQ(spec.model_overrides().latent_size(), 128);
  EXPECT_EQ(spec.hyper_parameters().batch_per_rank(), 32);
  EXPECT_EQ(spec.hyper_parameters().optimizer(), "rmsprop");
  EXPECT_DOUBLE_EQ(spec.hyper_parameters().loss_weights().energy(), 0.2);

  EXPECT_FALSE(ApplyParameter("hyper_parameters.momentum", Number(1), &spec).ok());
  EXPECT_FALSE(ApplyParameter("model_overrides.latent_size", Number(1.5), &spec).ok());
  EXPECT_FALSE(ApplyParameter("model_overrides.latent_size", Category("big"), &spec).ok());
  EXPECT_FALSE(ApplyParameter("hyper_parameters.optimizer", Number(1), &spec).ok());
  EXPECT_EQ(StudyParameterNames().size(), 15u);
}

TEST(StudyRequestsTest, SearchSpaceAndAssignmentsRoundTrip) {
  v1::StudySpec spec;
  v1::SearchParameter* p = spec.add_parameters();
  p->set_name("model_overrides.latent_size");
  p->set_kind(v1::SearchParameter::KIND_INTEGER);
  p->set_min(64);
  p->set_max(256);
  const studies::SearchSpace space = SearchSpaceOf(spec);
  ASSERT_EQ(space.size(), 1);
  EXPECT_EQ(space.parameters()[0].kind, studies::ParameterKind::kInteger);
  google::protobuf::Map<std::string, v1::ParameterValue> values;
  values["model_overrides.latent_size"] = Integer(100);
  values["hyper_parameters.optimizer"] = Category("rmsprop");
  const studies::Assignment a = AssignmentOf(values);
  EXPECT_EQ(std::get<int64_t>(a.at("model_overrides.latent_size")), 100);
  const auto back = ParametersOf(a);
  EXPECT_EQ(back.at("model_overrides.latent_size").integer(), 100);
  EXPECT_EQ(back.at("hyper_parameters.optimizer").category(), "rmsprop");
  EXPECT_EQ(FormatParameters(back),
            "hyper_parameters.optimizer=rmsprop, model_overrides.latent_size=100");
}

TEST(StudySummaryTest, MeanSpreadAndBestTrial) {
  const MeanAndSpread m = MeanAndSpreadOf({1.0, 2.0, 3.0});
  EXPECT_DOUBLE_EQ(m.mean, 2.0);
  EXPECT_DOUBLE_EQ(m.stddev, 1.0);
  EXPECT_DOUBLE_EQ(MeanAndSpreadOf({4.0}).stddev, 0.0);

  std::vector<v1::Trial> trials(4);
  for (int i = 0; i < 4; ++i) trials[i].set_number(i + 1);
  trials[0].set_state(v1::TRIAL_STATE_SUCCEEDED);
  trials[0].set_objective(0.5);
  trials[1].set_state(v1::TRIAL_STATE_SUCCEEDED);
  trials[1].set_objective(0.2);
  trials[1].set_device_hours(1.5);
  trials[2].set_state(v1::TRIAL_STATE_STOPPED);
  trials[2].set_objective(0.1);  // stopped trials never win
  trials[3].set_state(v1::TRIAL_STATE_RUNNING);
  trials[3].set_device_hours(0.5);
  EXPECT_EQ(BestTrialIndex(trials, /*maximize=*/false), 1);
  EXPECT_EQ(BestTrialIndex(trials, /*maximize=*/true), 0);
  v1::Study study;
  SummarizeStudy(trials, &study);
  EXPECT_EQ(study.trials_started(), 4);
  EXPECT_EQ(study.trials_running(), 1);
  EXPECT_EQ(study.trials_finished(), 3);
  EXPECT_DOUBLE_EQ(study.device_hours(), 2.0);
  EXPECT_EQ(study.best_trial(), 2);
  EXPECT_DOUBLE_EQ(study.best_objective(), 0.2);
}

TEST(StudyRequestsTest, JobSpecErrorsAreRenamedUnderTheBaseJob) {
  const absl::Status s =
      UnderBaseJob(absl::InvalidArgumentError("spec.world_size: is missing; set it"));
  EXPECT_EQ(s.message(), "spec.base_job.world_size: is missing; set it");
  EXPECT_EQ(UnderBaseJob(absl::InvalidArgumentError("spec.data_split.folds: is 12 but")).message(),
            "spec.folds: is 12 but");
  EXPECT_EQ(UnderBaseJob(absl::NotFoundError("spec.dataset: ds-x does not exist")).code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(UnderBaseJob(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace gantry::server
