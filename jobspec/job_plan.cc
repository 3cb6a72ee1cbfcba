#include "jobspec/job_plan.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/field_checks.h"
#include "base/safe_text.h"
#include "base/status_macros.h"

namespace gantry::jobspec {
namespace {

namespace v1 = ::gantry::v1;

using checks::CheckFinite;
using checks::CheckInt;
using checks::CheckRange01;
using checks::Invalid;
using checks::Sub;

// The preset, and what a baseline (no network: fitted by one rank, never fine-tuned) cannot be.
absl::Status CheckPreset(const v1::JobSpec& spec) {
  const std::string& preset = spec.model_preset();
  if (preset.empty()) {
    return Invalid("spec.model_preset", absl::StrCat("is missing; use ", JobPresetList()));
  }
  if (!IsJobPreset(preset)) {
    return Invalid("spec.model_preset", absl::StrCat("\"", BoundedField(preset),
                                                     "\" is unknown; use ", JobPresetList()));
  }
  if (BaselineKindOfPreset(preset).has_value()) {
    if (spec.world_size() > 1) {
      return Invalid("spec.world_size",
                     absl::StrCat("is ", spec.world_size(), "; a baseline (", preset,
                                  ") has no network to train in parallel: set 1"));
    }
    if (!spec.initial_model().empty()) {
      return Invalid("spec.initial_model",
                     absl::StrCat("a baseline (", preset, ") is fitted to its data, not fine-tuned"));
    }
  }
  return absl::OkStatus();
}

// Each override on its own (0 = the preset's value); the model they make is checked whole later.
absl::Status ApplyModelOverrides(const v1::ModelOverrides& o, gan::ModelConfig* m) {
  const std::string f = "spec.model_overrides";
  RETURN_IF_ERROR(CheckInt(o.latent_size(), 0, gan::kMaxLatent, Sub(f, "latent_size")));
  RETURN_IF_ERROR(CheckInt(o.generator_filters(), 0, gan::kMaxFilters, Sub(f, "generator_filters")));
  RETURN_IF_ERROR(
      CheckInt(o.discriminator_filters(), 0, gan::kMaxFilters, Sub(f, "discriminator_filters")));
  if (o.latent_size() > 0) m->latent = o.latent_size();
  if (o.generator_filters() > 0) m->generator_filters[0] = o.generator_filters();
  if (o.discriminator_filters() > 0) m->discriminator_filters[0] = o.discriminator_filters();
  return absl::OkStatus();
}

// `baseline`: a baseline-* preset has no optimiser step; its epochs and batch_per_rank may be
// left at 0 (they are ignored).
absl::Status ApplyHyperParameters(const v1::HyperParameters& hp, bool baseline, JobPlan* plan) {
  const std::string f = "spec.hyper_parameters";
  gan::ModelConfig& m = plan->model;
  if (!baseline && hp.epochs() == 0) {
    return Invalid(Sub(f, "epochs"), absl::StrCat("is missing; set it to 1..", kMaxEpochs));
  }
  RETURN_IF_ERROR(CheckInt(hp.epochs(), baseline ? 0 : 1, kMaxEpochs, Sub(f, "epochs")));
  if (!baseline && hp.batch_per_rank() == 0) {
    return Invalid(Sub(f, "batch_per_rank"),
                   absl::StrCat("is missing; set it to 1..", kMaxBatchPerRank));
  }
  RETURN_IF_ERROR(CheckInt(hp.batch_per_rank(), baseline ? 0 : 1, kMaxBatchPerRank,
                           Sub(f, "batch_per_rank")));
  RETURN_IF_ERROR(CheckFinite(hp.learning_rate(), Sub(f, "learning_rate")));
  if (hp.learning_rate() < 0 || hp.learning_rate() > kMaxLearningRate) {
    return Invalid(Sub(f, "learning_rate"),
                   absl::StrCat("is ", hp.learning_rate(), "; it must be > 0 and <= ",
                                kMaxLearningRate, " (0 = the preset default 1e-3)"));
  }
  if (hp.optimizer() == "adam") {
    return Invalid(Sub(f, "optimizer"),
                   "\"adam\" is not implemented by the trainer yet; use \"rmsprop\" (the 3DGAN "
                   "reference optimiser) or leave it empty");
  }
  if (!hp.optimizer().empty() && hp.optimizer() != "rmsprop") {
    return Invalid(Sub(f, "optimizer"), absl::StrCat("\"", BoundedField(hp.optimizer()),
                                                     "\" is unknown; use \"rmsprop\""));
  }
  if (hp.has_loss_weights()) {
    const v1::LossWeights& w = hp.loss_weights();
    const std::pair<const char*, double> weights[] = {{"adversarial", w.adversarial()},
                                                      {"energy", w.energy()},
                                                      {"angle", w.angle()},
                                                      {"ecal_sum", w.ecal_sum()}};
    for (const auto& [name, value] : weights) {
      const std::string field = Sub(Sub(f, "loss_weights"), name);
      RETURN_IF_ERROR(CheckFinite(value, field));
      if (value < 0) return Invalid(field, absl::StrCat("is ", value, "; it must be >= 0"));
    }
    // Order of ModelConfig::loss_weights: [BCE, E, ecal] or [BCE, E, theta, ecal]; 0 keeps the
    // preset's weight.
    if (w.adversarial() > 0) m.loss_weights[0] = w.adversarial();
    if (w.energy() > 0) m.loss_weights[1] = w.energy();
    if (m.variable_angle() && w.angle() > 0) m.loss_weights[2] = w.angle();
    if (w.ecal_sum() > 0) m.loss_weights.back() = w.ecal_sum();
  }
  RETURN_IF_ERROR(CheckInt(hp.warmup_epochs(), 0, hp.epochs(), Sub(f, "warmup_epochs")));
  if (!(hp.lr_decay_to() >= 0 && hp.lr_decay_to() <= 1)) {
    return Invalid(
        Sub(f, "lr_decay_to"),
        absl::StrCat("is ", hp.lr_decay_to(),
                     "; give a fraction in (0, 1] of the learning rate to decay to, or 0 "
                     "for a constant learning rate"));
  }
  RETURN_IF_ERROR(CheckRange01(hp.label_flip_probability(), 0.5, Sub(f, "label_flip_probability")));
  RETURN_IF_ERROR(CheckInt(hp.generator_steps_per_discriminator_step(), 0, 100,
                           Sub(f, "generator_steps_per_discriminator_step")));
  if (hp.learning_rate() > 0) m.learning_rate = hp.learning_rate();
  if (hp.label_flip_probability() > 0) m.label_flip = hp.label_flip_probability();
  if (hp.generator_steps_per_discriminator_step() > 0) {
    m.generator_steps = hp.generator_steps_per_discriminator_step();
  }
  plan->epochs = hp.epochs();
  plan->batch_per_rank = hp.batch_per_rank();
  plan->seed = hp.seed();
  plan->scale_lr_with_world_size = hp.scale_lr_with_world_size();
  plan->warmup_epochs = hp.warmup_epochs();
  plan->lr_decay_to = hp.lr_decay_to() > 0 ? hp.lr_decay_to() : 1.0;
  if (!v1::TrainingPrecision_IsValid(hp.precision())) {
    return Invalid(Sub(f, "precision"),
                   "is not a known TrainingPrecision; use TRAINING_PRECISION_FP32 or "
                   "TRAINING_PRECISION_BF16_AUTOCAST");
  }
  plan->bf16_autocast = hp.precision() == v1::TRAINING_PRECISION_BF16_AUTOCAST;
  if (plan->bf16_autocast && baseline) {
    return Invalid(Sub(f, "precision"),
                   "a baseline is fitted, not trained: leave precision unset for a baseline-* "
                   "preset");
  }
  return absl::OkStatus();
}

// The model: the preset with the spec's overrides and hyper-parameters applied, validated whole
// (its bounds: networks of at most ~56M conv weights). A baseline-* preset resolves to 3dgan-25's
// config (its grid, layout and data normalisation), named after the baseline.
absl::Status PlanModel(const v1::JobSpec& spec, JobPlan* plan) {
  plan->baseline = BaselineKindOfPreset(spec.model_preset());
  ASSIGN_OR_RETURN(plan->model,
                   gan::PresetConfig(plan->baseline ? "3dgan-25" : spec.model_preset()));
  if (plan->baseline) plan->model.preset = spec.model_preset();
  RETURN_IF_ERROR(ApplyModelOverrides(spec.model_overrides(), &plan->model));
  RETURN_IF_ERROR(
      ApplyHyperParameters(spec.hyper_parameters(), plan->baseline.has_value(), plan));
  if (plan->bf16_autocast && spec.resources_per_rank().device() != v1::DEVICE_KIND_GPU) {
    return Invalid("spec.hyper_parameters.precision",
                   "TRAINING_PRECISION_BF16_AUTOCAST trains on GPUs: set "
                   "spec.resources_per_rank.device to DEVICE_KIND_GPU, or leave precision unset "
                   "(FP32) for CPU ranks");
  }
  if (absl::Status s = gan::ValidateModelConfig(plan->model); !s.ok()) {
    return Invalid("spec.model_overrides",
                   absl::StrCat("make a model this service does not train: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status PlanValidation(const v1::ValidationSettings& v, JobPlan* plan) {
  const std::string f = "spec.validation";
  RETURN_IF_ERROR(CheckRange01(v.holdout_fraction(), kMaxHoldoutFraction, Sub(f, "holdout_fraction")));
  if (v.energies_size() > kMaxValidationEnergies) {
    return Invalid(Sub(f, "energies"), absl::StrCat("has ", v.energies_size(),
                                                    " entries; give at most ",
                                                    kMaxValidationEnergies));
  }
  for (int i = 0; i < v.energies_size(); ++i) {
    const std::string field = absl::StrCat(f, ".energies[", i, "]");
    RETURN_IF_ERROR(CheckFinite(v.energies(i), field));
    if (v.energies(i) <= 0) {
      return Invalid(field, absl::StrCat("is ", v.energies(i), " GeV; energies must be > 0"));
    }
  }
  RETURN_IF_ERROR(CheckFinite(v.energy_bin_half_width(), Sub(f, "energy_bin_half_width")));
  if (v.energy_bin_half_width() < 0) {
    return Invalid(Sub(f, "energy_bin_half_width"), "must be >= 0 (0 = default 5 GeV)");
  }
  RETURN_IF_ERROR(CheckInt(v.showers_per_bin(), 0, kMaxShowersPerBin, Sub(f, "showers_per_bin")));
  plan->validation = !v.disabled();
  plan->holdout_fraction = v.disabled() ? 0 : (v.holdout_fraction() > 0 ? v.holdout_fraction() : 0.1);
  if (v.has_leave_out()) {
    const std::string band = Sub(f, "leave_out");
    const v1::EnergyBand& b = v.leave_out();
    RETURN_IF_ERROR(CheckFinite(b.centre_gev(), Sub(band, "centre_gev")));
    RETURN_IF_ERROR(CheckFinite(b.half_width_gev(), Sub(band, "half_width_gev")));
    if (v.disabled()) {
      return Invalid(band, "scores the model in the band it was not trained on; enable validation "
                           "(unset spec.validation.disabled) or drop leave_out");
    }
    if (b.half_width_gev() <= 0) {
      return Invalid(Sub(band, "half_width_gev"),
                     absl::StrCat("is ", b.half_width_gev(), " GeV; give a width > 0"));
    }
    if (b.centre_gev() - b.half_width_gev() <= 0) {
      return Invalid(band, absl::StrCat("[", b.centre_gev() - b.half_width_gev(), ", ",
                                        b.centre_gev() + b.half_width_gev(),
                                        "] GeV reaches 0; give a band of positive energies"));
    }
    plan->leave_out = LeftOutBand{b.centre_gev() - b.half_width_gev(),
                                  b.centre_gev() + b.half_width_gev()};
  }
  return absl::OkStatus();
}

absl::Status PlanCheckpoints(const v1::CheckpointPolicy& c, JobPlan* plan) {
  const std::string f = "spec.checkpoint_policy";
  RETURN_IF_ERROR(CheckInt(c.every_epochs(), 0, kMaxEpochs, Sub(f, "every_epochs")));
  RETURN_IF_ERROR(CheckInt(c.keep_last(), 0, kMaxKeepLast, Sub(f, "keep_last")));
  RETURN_IF_ERROR(CheckInt(c.every_steps(), 0, kMaxCheckpointEverySteps, Sub(f, "every_steps")));
  if (!(c.every_minutes() >= 0 && c.every_minutes() <= kMaxCheckpointEveryMinutes)) {
    return Invalid(Sub(f, "every_minutes"),
                   absl::StrCat("is ", c.every_minutes(), "; it must be in 0..",
                                kMaxCheckpointEveryMinutes, " (a week; 0 = off)"));
  }
  if (c.keep_best() && !plan->validation) {
    return Invalid(Sub(f, "keep_best"),
                   "needs validation: the best checkpoint is chosen by its validation figure of "
                   "merit (fom), and spec.validation.disabled is set");
  }
  plan->checkpoint_every_epochs = c.every_epochs();
  plan->checkpoint_every_steps = c.every_steps();
  plan->checkpoint_every_minutes = c.every_minutes();
  plan->keep_last = std::max(1, c.keep_last());
  plan->keep_best = c.keep_best();
  if (!c.best_metric().empty()) {
    if (!c.keep_best()) {
      return Invalid(Sub(f, "best_metric"), "is the figure keep_best minimises; set keep_best too");
    }
    const auto known = std::find(std::begin(kBestMetrics), std::end(kBestMetrics),
                                 c.best_metric()) != std::end(kBestMetrics);
    if (!known) {
      return Invalid(Sub(f, "best_metric"),
                     absl::StrCat("is not a validation metric a checkpoint can be chosen by; use "
                                  "one of ",
                                  absl::StrJoin(kBestMetrics, ", ")));
    }
    plan->best_metric = c.best_metric();
  }
  if (c.register_best() && !c.keep_best()) {
    return Invalid(Sub(f, "register_best"),
                   "registers the checkpoint keep_best keeps; set keep_best too");
  }
  plan->register_best = c.register_best();
  return absl::OkStatus();
}

absl::Status PlanSplit(const v1::JobSpec& spec, JobPlan* plan) {
  if (!spec.has_data_split()) return absl::OkStatus();
  const v1::DataSplit& split = spec.data_split();
  RETURN_IF_ERROR(CheckInt(split.folds(), 2, kMaxFolds, "spec.data_split.folds"));
  RETURN_IF_ERROR(
      CheckInt(split.validation_fold(), 0, split.folds() - 1, "spec.data_split.validation_fold"));
  if (!plan->validation) {
    return Invalid("spec.data_split",
                   "needs validation: the job validates on its fold, and "
                   "spec.validation.disabled is set");
  }
  plan->folds = split.folds();
  plan->validation_fold = split.validation_fold();
  plan->split_seed = split.seed();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobPlan> PlanJob(const v1::JobSpec& spec) {
  JobPlan plan;
  RETURN_IF_ERROR(CheckPreset(spec));
  RETURN_IF_ERROR(PlanModel(spec, &plan));
  RETURN_IF_ERROR(PlanValidation(spec.validation(), &plan));
  RETURN_IF_ERROR(PlanCheckpoints(spec.checkpoint_policy(), &plan));
  RETURN_IF_ERROR(PlanSplit(spec, &plan));
  // The input pipeline's sizes; 0 = automatic, which each rank resolves on its machine.
  RETURN_IF_ERROR(CheckInt(spec.data_pipeline().prefetch_batches(), 0, kMaxPrefetchBatches,
                           "spec.data_pipeline.prefetch_batches"));
  RETURN_IF_ERROR(CheckInt(spec.data_pipeline().loader_threads(), 0, kMaxLoaderThreads,
                           "spec.data_pipeline.loader_threads"));
  return plan;
}

}  // namespace gantry::jobspec
