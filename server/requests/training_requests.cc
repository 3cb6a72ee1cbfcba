#include "server/requests/training_requests.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

using checks::CheckFinite;
using checks::CheckInt;
using checks::CheckRange01;
using checks::Invalid;
using checks::Sub;

// `baseline`: a baseline-* preset, which has no optimiser step: epochs and batch_per_rank may be
// left at 0 (they are ignored).
absl::Status ValidateHyperParameters(const v1::HyperParameters& hp, absl::string_view f,
                                     bool baseline) {
  if (baseline) {
    RETURN_IF_ERROR(CheckInt(hp.epochs(), 0, kMaxEpochs, Sub(f, "epochs")));
    RETURN_IF_ERROR(CheckInt(hp.batch_per_rank(), 0, kMaxBatchPerRank, Sub(f, "batch_per_rank")));
  } else if (hp.epochs() == 0) {
    return Invalid(Sub(f, "epochs"), absl::StrCat("is missing; set it to 1..", kMaxEpochs));
  }
  if (!baseline) RETURN_IF_ERROR(CheckInt(hp.epochs(), 1, kMaxEpochs, Sub(f, "epochs")));
  if (!baseline && hp.batch_per_rank() == 0) {
    return Invalid(Sub(f, "batch_per_rank"),
                   absl::StrCat("is missing; set it to 1..", kMaxBatchPerRank));
  }
  if (!baseline) {
    RETURN_IF_ERROR(CheckInt(hp.batch_per_rank(), 1, kMaxBatchPerRank, Sub(f, "batch_per_rank")));
  }
  RETURN_IF_ERROR(CheckFinite(hp.learning_rate(), Sub(f, "learning_rate")));
  if (hp.learning_rate() < 0 || hp.learning_rate() > 10) {
    return Invalid(Sub(f, "learning_rate"),
                   absl::StrCat("is ", hp.learning_rate(),
                                "; it must be > 0 and <= 10 (0 = the preset default 1e-3)"));
  }
  if (hp.optimizer() == "adam") {
    return Invalid(Sub(f, "optimizer"),
                   "\"adam\" is not implemented by the trainer yet; use \"rmsprop\" (the 3DGAN "
                   "reference optimiser) or leave it empty");
  }
  if (!hp.optimizer().empty() && hp.optimizer() != "rmsprop") {
    return Invalid(Sub(f, "optimizer"),
                   absl::StrCat("\"", hp.optimizer(), "\" is unknown; use \"rmsprop\""));
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
  }
  RETURN_IF_ERROR(CheckInt(hp.warmup_epochs(), 0, hp.epochs(), Sub(f, "warmup_epochs")));
  RETURN_IF_ERROR(CheckFinite(hp.lr_decay_to(), Sub(f, "lr_decay_to")));
  if (hp.lr_decay_to() < 0 || hp.lr_decay_to() > 1) {
    return Invalid(
        Sub(f, "lr_decay_to"),
        absl::StrCat("is ", hp.lr_decay_to(),
                     "; give a fraction in (0, 1] of the learning rate to decay to, or 0 "
                     "for a constant learning rate"));
  }
  RETURN_IF_ERROR(CheckRange01(hp.label_flip_probability(), 0.5, Sub(f, "label_flip_probability")));
  RETURN_IF_ERROR(CheckInt(hp.generator_steps_per_discriminator_step(), 0, 100,
                           Sub(f, "generator_steps_per_discriminator_step")));
  return absl::OkStatus();
}

absl::Status ValidateValidationSettings(const v1::ValidationSettings& v, absl::string_view f) {
  RETURN_IF_ERROR(CheckRange01(v.holdout_fraction(), 0.9, Sub(f, "holdout_fraction")));
  if (v.energies_size() > 1000) {
    return Invalid(Sub(f, "energies"),
                   absl::StrCat("has ", v.energies_size(), " entries; give at most 1000"));
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
  return CheckInt(v.showers_per_bin(), 0, 100000, Sub(f, "showers_per_bin"));
}

}  // namespace

// The presets gantry-worker knows (workers/gan/model_config.h and, without a network,
// workers/baseline/baseline_sampler.h).
constexpr char kKnownPresets[] =
    "\"3dgan-25\", \"3dgan-51\", \"tiny\", \"tiny-template\", \"baseline-template\" or "
    "\"baseline-spots\"";

absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  if (spec.display_name().size() > 256) {
    return Invalid("spec.display_name", "is longer than 256 characters");
  }
  RETURN_IF_ERROR(ValidateLabels(spec.labels(), "spec.labels"));
  const std::string& preset = spec.model_preset();
  if (preset.empty()) {
    return Invalid("spec.model_preset", absl::StrCat("is missing; use ", kKnownPresets));
  }
  const bool baseline = preset == "baseline-template" || preset == "baseline-spots";
  if (preset != "3dgan-25" && preset != "3dgan-51" && preset != "tiny" &&
      preset != "tiny-template" && !baseline) {
    return Invalid("spec.model_preset",
                   absl::StrCat("\"", preset, "\" is unknown; use ", kKnownPresets));
  }
  // A baseline (no network) is fitted by one rank and never fine-tuned (workers/baseline).
  if (baseline && spec.world_size() > 1) {
    return Invalid("spec.world_size",
                   absl::StrCat("is ", spec.world_size(), "; a baseline (", preset,
                                ") has no network to train in parallel: set 1"));
  }
  if (baseline && !spec.initial_model().empty()) {
    return Invalid("spec.initial_model",
                   absl::StrCat("a baseline (", preset, ") is fitted to its data, not fine-tuned"));
  }
  const v1::ModelOverrides& mo = spec.model_overrides();
  RETURN_IF_ERROR(CheckInt(mo.latent_size(), 0, 4096, "spec.model_overrides.latent_size"));
  RETURN_IF_ERROR(
      CheckInt(mo.generator_filters(), 0, 1024, "spec.model_overrides.generator_filters"));
  RETURN_IF_ERROR(
      CheckInt(mo.discriminator_filters(), 0, 1024, "spec.model_overrides.discriminator_filters"));
  RETURN_IF_ERROR(ValidateDatasetRef(spec.dataset(), preset, "spec.dataset").status());
  RETURN_IF_ERROR(
      ValidateHyperParameters(spec.hyper_parameters(), "spec.hyper_parameters", baseline));
  if (spec.world_size() == 0) {
    return Invalid("spec.world_size",
                   absl::StrCat("is missing; set the number of ranks, 1..", kMaxWorldSize));
  }
  RETURN_IF_ERROR(CheckInt(spec.world_size(), 1, kMaxWorldSize, "spec.world_size"));
  const v1::Resources& r = spec.resources_per_rank();
  if (!v1::DeviceKind_IsValid(r.device())) {
    return Invalid("spec.resources_per_rank.device", "is not a known DeviceKind");
  }
  RETURN_IF_ERROR(CheckInt(r.count(), 0, 16, "spec.resources_per_rank.count"));
  if (r.device() == v1::DEVICE_KIND_GPU && r.count() > 1) {
    return Invalid("spec.resources_per_rank.count",
                   absl::StrCat("is ", r.count(),
                                "; gantry runs one GPU per rank: set count to 1 (or 0) and raise "
                                "world_size to use more GPUs"));
  }
  RETURN_IF_ERROR(CheckInt(r.threads(), 0, 1024, "spec.resources_per_rank.threads"));
  RETURN_IF_ERROR(ValidateLabels(spec.worker_selector(), "spec.worker_selector"));
  RETURN_IF_ERROR(CheckInt(spec.priority(), -100, 100, "spec.priority"));
  const v1::CheckpointPolicy& cp = spec.checkpoint_policy();
  RETURN_IF_ERROR(
      CheckInt(cp.every_epochs(), 0, kMaxEpochs, "spec.checkpoint_policy.every_epochs"));
  RETURN_IF_ERROR(CheckInt(cp.keep_last(), 0, 1000, "spec.checkpoint_policy.keep_last"));
  RETURN_IF_ERROR(CheckInt(cp.every_steps(), 0, 1000000, "spec.checkpoint_policy.every_steps"));
  if (!(cp.every_minutes() >= 0 && cp.every_minutes() <= 10080)) {
    return Invalid("spec.checkpoint_policy.every_minutes",
                   absl::StrCat("is ", cp.every_minutes(), "; it must be in 0..10080 (a week)"));
  }
  if (cp.keep_best() && spec.validation().disabled()) {
    return Invalid("spec.checkpoint_policy.keep_best",
                   "needs validation: the best checkpoint is chosen by its validation figure of "
                   "merit (fom), and spec.validation.disabled is set");
  }
  RETURN_IF_ERROR(CheckInt(spec.max_restarts(), 0, 100, "spec.max_restarts"));
  if (!spec.initial_model().empty()) {
    RETURN_IF_ERROR(ParseModelRef(spec.initial_model(), "spec.initial_model").status());
  }
  RETURN_IF_ERROR(ValidateValidationSettings(spec.validation(), "spec.validation"));
  if (!spec.model_name().empty()) {
    RETURN_IF_ERROR(ValidateModelName(spec.model_name(), "spec.model_name"));
  }
  if (!v1::Visibility_IsValid(spec.model_visibility())) {
    return Invalid("spec.model_visibility", "is not a known Visibility; use PRIVATE or PUBLIC");
  }
  RETURN_IF_ERROR(CheckInt(spec.data_pipeline().prefetch_batches(), 0, 1024,
                           "spec.data_pipeline.prefetch_batches"));
  RETURN_IF_ERROR(
      CheckInt(spec.data_pipeline().loader_threads(), 0, 256, "spec.data_pipeline.loader_threads"));
  if (spec.has_data_split()) {
    const v1::DataSplit& split = spec.data_split();
    RETURN_IF_ERROR(CheckInt(split.folds(), 2, kMaxFolds, "spec.data_split.folds"));
    RETURN_IF_ERROR(
        CheckInt(split.validation_fold(), 0, split.folds() - 1, "spec.data_split.validation_fold"));
    if (spec.validation().disabled()) {
      return Invalid("spec.data_split",
                     "needs validation: the job validates on its fold, and "
                     "spec.validation.disabled is set");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateListJobs(const v1::ListJobsRequest& request) {
  for (int i = 0; i < request.states_size(); ++i) {
    if (!v1::JobState_IsValid(request.states(i)) ||
        request.states(i) == v1::JOB_STATE_UNSPECIFIED) {
      return Invalid(absl::StrCat("states[", i, "]"),
                     absl::StrCat("is ", request.states(i), ", not a job state such as QUEUED"));
    }
  }
  if (!request.owner().empty()) RETURN_IF_ERROR(ValidateTenantName(request.owner(), "owner"));
  RETURN_IF_ERROR(ValidateLabels(request.label_selector(), "label_selector"));
  return ValidatePage(request.page(), "page").status();
}

absl::Status ValidateGetJobLogs(const v1::GetJobLogsRequest& request) {
  RETURN_IF_ERROR(ValidateId(request.job_id(), "job-", "job_id"));
  RETURN_IF_ERROR(CheckInt(request.rank(), -1, kMaxWorldSize - 1, "rank"));
  return CheckInt(request.tail(), 0, kMaxLogTail, "tail");
}

}  // namespace gantry::server
