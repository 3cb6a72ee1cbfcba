// One table of job specs held against both sides: what jobspec::PlanJob decides, gantry-server's
// ValidateJobSpec (submission) and the worker's PlanRank (each rank, from its Assignment) must
// decide the same, naming the same field. A spec the server accepts is one every rank can plan.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "jobspec/job_plan.h"
#include "jobspec/presets.h"
#include "server/requests/training_requests.h"
#if GANTRY_WITH_RANK_PLAN
#include "workers/runner/rank_plan.h"
#endif

namespace gantry {
namespace {

namespace v1 = ::gantry::v1;

v1::JobSpec Good() {
  v1::JobSpec spec;
  spec.set_model_preset("tiny");
  spec.set_dataset("toymc:layout=25,events=100");
  spec.mutable_hyper_parameters()->set_epochs(2);
  spec.mutable_hyper_parameters()->set_batch_per_rank(8);
  spec.set_world_size(2);
  return spec;
}

#if GANTRY_WITH_RANK_PLAN
// The Assignment a rank of `spec` gets.
v1::Assignment AssignmentOf(const v1::JobSpec& spec) {
  v1::Assignment a;
  a.set_job_id("job-table");
  a.set_world_size(std::max(1, spec.world_size()));
  a.set_rank(0);
  a.set_rendezvous_host("127.0.0.1");
  a.set_rendezvous_port(29500);
  *a.mutable_spec() = spec;
  return a;
}
#endif

// "" when `status` is OK, else the field its message names ("<field>: <what>").
std::string FieldOf(const absl::Status& status) {
  if (status.ok()) return "";
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const std::string message(status.message());
  return message.substr(0, message.find(": "));
}

struct Row {
  std::string what;
  std::function<void(v1::JobSpec*)> change;
  std::string field;  // "" = accepted
};

// spec.validation.leave_out = centre +- half_width (GeV).
void LeaveOut(v1::JobSpec* spec, double centre_gev, double half_width_gev) {
  spec->mutable_validation()->mutable_leave_out()->set_centre_gev(centre_gev);
  spec->mutable_validation()->mutable_leave_out()->set_half_width_gev(half_width_gev);
}

std::vector<Row> Table() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  using S = v1::JobSpec;
  return {
      {"the good spec", [](S*) {}, ""},
      {"the variable-angle preset",
       [](S* s) {
         s->set_model_preset("3dgan-51");
         s->set_dataset("toymc:layout=51,events=100");
       },
       ""},
      {"a baseline without epochs or batch",
       [](S* s) {
         s->set_model_preset("baseline-spots");
         s->set_world_size(1);
         s->mutable_hyper_parameters()->clear_epochs();
         s->mutable_hyper_parameters()->clear_batch_per_rank();
       },
       ""},
      {"no preset", [](S* s) { s->clear_model_preset(); }, "spec.model_preset"},
      {"an unknown preset", [](S* s) { s->set_model_preset("3dgan-99"); }, "spec.model_preset"},
      {"a baseline on two ranks", [](S* s) { s->set_model_preset("baseline-template"); },
       "spec.world_size"},
      // The server once accepted up to 1024 filters, which every worker then refused.
      {"the widest first generator conv",
       [](S* s) { s->mutable_model_overrides()->set_generator_filters(gan::kMaxFilters); }, ""},
      {"a generator conv wider than a worker builds",
       [](S* s) { s->mutable_model_overrides()->set_generator_filters(gan::kMaxFilters + 1); },
       "spec.model_overrides.generator_filters"},
      {"a discriminator conv wider than a worker builds",
       [](S* s) { s->mutable_model_overrides()->set_discriminator_filters(1024); },
       "spec.model_overrides.discriminator_filters"},
      {"a latent wider than a worker builds",
       [](S* s) { s->mutable_model_overrides()->set_latent_size(gan::kMaxLatent + 1); },
       "spec.model_overrides.latent_size"},
      {"a negative override", [](S* s) { s->mutable_model_overrides()->set_latent_size(-1); },
       "spec.model_overrides.latent_size"},
      {"no epochs", [](S* s) { s->mutable_hyper_parameters()->clear_epochs(); },
       "spec.hyper_parameters.epochs"},
      {"too many epochs",
       [](S* s) { s->mutable_hyper_parameters()->set_epochs(jobspec::kMaxEpochs + 1); },
       "spec.hyper_parameters.epochs"},
      {"no batch", [](S* s) { s->mutable_hyper_parameters()->clear_batch_per_rank(); },
       "spec.hyper_parameters.batch_per_rank"},
      {"a learning rate above 10",
       [](S* s) { s->mutable_hyper_parameters()->set_learning_rate(11); },
       "spec.hyper_parameters.learning_rate"},
      {"a NaN loss weight",
       [nan](S* s) { s->mutable_hyper_parameters()->mutable_loss_weights()->set_energy(nan); },
       "spec.hyper_parameters.loss_weights.energy"},
      {"adam", [](S* s) { s->mutable_hyper_parameters()->set_optimizer("adam"); },
       "spec.hyper_parameters.optimizer"},
      {"a warm-up longer than the run",
       [](S* s) { s->mutable_hyper_parameters()->set_warmup_epochs(3); },
       "spec.hyper_parameters.warmup_epochs"},
      {"a decay above 1", [](S* s) { s->mutable_hyper_parameters()->set_lr_decay_to(1.5); },
       "spec.hyper_parameters.lr_decay_to"},
      {"bf16 autocast on GPU ranks",
       [](S* s) {
         s->mutable_hyper_parameters()->set_precision(v1::TRAINING_PRECISION_BF16_AUTOCAST);
         s->mutable_resources_per_rank()->set_device(v1::DEVICE_KIND_GPU);
       },
       ""},
      {"bf16 autocast on CPU ranks",
       [](S* s) {
         s->mutable_hyper_parameters()->set_precision(v1::TRAINING_PRECISION_BF16_AUTOCAST);
       },
       "spec.hyper_parameters.precision"},
      {"an unknown training precision",
       [](S* s) {
         s->mutable_hyper_parameters()->set_precision(static_cast<v1::TrainingPrecision>(7));
       },
       "spec.hyper_parameters.precision"},
      {"bf16 autocast for a baseline",
       [](S* s) {
         s->set_model_preset("baseline-spots");
         s->set_world_size(1);
         s->mutable_hyper_parameters()->set_precision(v1::TRAINING_PRECISION_BF16_AUTOCAST);
         s->mutable_resources_per_rank()->set_device(v1::DEVICE_KIND_GPU);
       },
       "spec.hyper_parameters.precision"},
      {"label flips of one half",
       [](S* s) { s->mutable_hyper_parameters()->set_label_flip_probability(0.5); },
       "spec.hyper_parameters.label_flip_probability"},
      {"a hold-out of 95%", [](S* s) { s->mutable_validation()->set_holdout_fraction(0.95); },
       "spec.validation.holdout_fraction"},
      {"a validation energy of 0", [](S* s) { s->mutable_validation()->add_energies(0); },
       "spec.validation.energies[0]"},
      {"a left-out band of 80-120 GeV", [](S* s) { LeaveOut(s, 100, 20); }, ""},
      {"a left-out band without validation",
       [](S* s) {
         s->mutable_validation()->set_disabled(true);
         LeaveOut(s, 100, 20);
       },
       "spec.validation.leave_out"},
      {"a left-out band of no width", [](S* s) { LeaveOut(s, 100, 0); },
       "spec.validation.leave_out.half_width_gev"},
      {"a left-out band reaching 0 GeV", [](S* s) { LeaveOut(s, 10, 10); },
       "spec.validation.leave_out"},
      {"a NaN left-out centre", [nan](S* s) { LeaveOut(s, nan, 10); },
       "spec.validation.leave_out.centre_gev"},
      {"keep_best without validation",
       [](S* s) {
         s->mutable_validation()->set_disabled(true);
         s->mutable_checkpoint_policy()->set_keep_best(true);
       },
       "spec.checkpoint_policy.keep_best"},
      {"a best metric without keep_best",
       [](S* s) { s->mutable_checkpoint_policy()->set_best_metric("sep_mean"); },
       "spec.checkpoint_policy.best_metric"},
      {"a best metric that is no lower-is-better validation metric",
       [](S* s) {
         s->mutable_checkpoint_policy()->set_keep_best(true);
         s->mutable_checkpoint_policy()->set_best_metric("auc_features_spread");
       },
       "spec.checkpoint_policy.best_metric"},
      {"register_best without keep_best",
       [](S* s) { s->mutable_checkpoint_policy()->set_register_best(true); },
       "spec.checkpoint_policy.register_best"},
      {"checkpoints kept above the bound",
       [](S* s) { s->mutable_checkpoint_policy()->set_keep_last(jobspec::kMaxKeepLast + 1); },
       "spec.checkpoint_policy.keep_last"},
      {"a checkpoint every 8 days",
       [](S* s) { s->mutable_checkpoint_policy()->set_every_minutes(8 * 1440); },
       "spec.checkpoint_policy.every_minutes"},
      {"one fold", [](S* s) { s->mutable_data_split()->set_folds(1); }, "spec.data_split.folds"},
      {"a fold past the last",
       [](S* s) {
         s->mutable_data_split()->set_folds(5);
         s->mutable_data_split()->set_validation_fold(5);
       },
       "spec.data_split.validation_fold"},
      {"prefetching beyond the bound",
       [](S* s) {
         s->mutable_data_pipeline()->set_prefetch_batches(jobspec::kMaxPrefetchBatches + 1);
       },
       "spec.data_pipeline.prefetch_batches"},
      {"negative loader threads", [](S* s) { s->mutable_data_pipeline()->set_loader_threads(-1); },
       "spec.data_pipeline.loader_threads"},
  };
}

TEST(JobPlanTest, ServerAndRankDecideEverySpecAsThePlanDoes) {
#if !GANTRY_WITH_RANK_PLAN
  std::cout << "NOT RUN: the rank plan's side (built with the worker, which this build without "
               "LibTorch has not); the table holds the plan and the server to each other\n";
#endif
  for (const Row& row : Table()) {
    SCOPED_TRACE(row.what);
    v1::JobSpec spec = Good();
    row.change(&spec);
    const absl::StatusOr<jobspec::JobPlan> plan = jobspec::PlanJob(spec);
    EXPECT_EQ(FieldOf(plan.status()), row.field) << plan.status();
    EXPECT_EQ(FieldOf(server::ValidateJobSpec(spec)), row.field) << server::ValidateJobSpec(spec);
#if GANTRY_WITH_RANK_PLAN
    const absl::StatusOr<runner::RankPlan> rank = runner::PlanRank(AssignmentOf(spec));
    EXPECT_EQ(FieldOf(rank.status()), row.field) << rank.status();
#endif
  }
}

TEST(JobPlanTest, ThePlanCarriesTheSpec) {
  v1::JobSpec spec = Good();
  spec.mutable_model_overrides()->set_latent_size(32);
  spec.mutable_hyper_parameters()->set_learning_rate(2e-4);
  spec.mutable_hyper_parameters()->set_lr_decay_to(0.1);
  spec.mutable_validation()->set_holdout_fraction(0.25);
  spec.mutable_checkpoint_policy()->set_every_steps(7);
  spec.mutable_data_split()->set_folds(4);
  spec.mutable_data_split()->set_validation_fold(3);
  LeaveOut(&spec, 100, 20);
  absl::StatusOr<jobspec::JobPlan> plan = jobspec::PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->model.preset, "tiny");
  EXPECT_EQ(plan->model.latent, 32);
  EXPECT_DOUBLE_EQ(plan->model.learning_rate, 2e-4);
  EXPECT_DOUBLE_EQ(plan->lr_decay_to, 0.1);
  EXPECT_EQ(plan->epochs, 2);
  EXPECT_EQ(plan->batch_per_rank, 8);
  EXPECT_DOUBLE_EQ(plan->holdout_fraction, 0.25);
  EXPECT_EQ(plan->checkpoint_every_steps, 7);
  EXPECT_EQ(plan->folds, 4);
  EXPECT_EQ(plan->validation_fold, 3);
  EXPECT_FALSE(plan->baseline.has_value());
  ASSERT_TRUE(plan->leave_out.has_value());
  EXPECT_DOUBLE_EQ(plan->leave_out->min_gev, 80);
  EXPECT_DOUBLE_EQ(plan->leave_out->max_gev, 120);
  EXPECT_TRUE(plan->leave_out->Contains(80));
  EXPECT_TRUE(plan->leave_out->Contains(120));
  EXPECT_FALSE(plan->leave_out->Contains(120.01));
  EXPECT_FALSE(plan->bf16_autocast);
  spec.mutable_hyper_parameters()->set_precision(v1::TRAINING_PRECISION_BF16_AUTOCAST);
  spec.mutable_resources_per_rank()->set_device(v1::DEVICE_KIND_GPU);
  plan = jobspec::PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->bf16_autocast);
  EXPECT_FALSE(plan->keep_best);
  EXPECT_EQ(plan->best_metric, "fom");
  EXPECT_FALSE(plan->register_best);
  for (const char* metric : jobspec::kBestMetrics) {
    spec.mutable_checkpoint_policy()->set_keep_best(true);
    spec.mutable_checkpoint_policy()->set_best_metric(metric);
    spec.mutable_checkpoint_policy()->set_register_best(true);
    plan = jobspec::PlanJob(spec);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(plan->keep_best);
    EXPECT_EQ(plan->best_metric, metric);
    EXPECT_TRUE(plan->register_best);
  }

  spec = Good();
  spec.set_model_preset("baseline-template");
  spec.set_world_size(1);
  plan = jobspec::PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->baseline, jobspec::BaselineKind::kTemplate);
  EXPECT_EQ(plan->model.preset, "baseline-template");
  EXPECT_EQ(plan->model.grid, (std::array<int64_t, 3>{25, 25, 25}));  // 3dgan-25's layout
}

TEST(JobPlanTest, PresetsAreOneList) {
  const std::vector<std::string> names = jobspec::JobPresetNames();
  for (const std::string& name : gan::PresetNames()) EXPECT_TRUE(jobspec::IsJobPreset(name)) << name;
  EXPECT_TRUE(jobspec::IsJobPreset("baseline-template"));
  EXPECT_TRUE(jobspec::IsJobPreset("baseline-spots"));
  EXPECT_TRUE(jobspec::IsJobPreset("baseline-spots-smeared"));
  EXPECT_FALSE(jobspec::IsJobPreset("custom"));
  EXPECT_EQ(names.size(), gan::PresetNames().size() + 3);
  for (const std::string& name : names) {
    EXPECT_NE(jobspec::JobPresetList().find("\"" + name + "\""), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace gantry
