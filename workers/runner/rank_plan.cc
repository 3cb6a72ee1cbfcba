#include "workers/runner/rank_plan.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/build_info.h"
#include "base/status_macros.h"

namespace gantry::runner {
namespace {

absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

bool IsSha256Hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string CodeVersion() { return absl::StrCat(GantryVersion(), "+", GantryGitCommit()); }

absl::StatusOr<v1::Assignment> ReadAssignmentFile(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("--assignment: a file path is required");
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("assignment file ", path, " cannot be opened"));
  std::stringstream bytes;
  bytes << in.rdbuf();
  v1::Assignment assignment;
  if (!assignment.ParseFromString(bytes.str())) {
    return absl::InvalidArgumentError(
        absl::StrCat("assignment file ", path, " is not a serialized gantry.v1.Assignment"));
  }
  return assignment;
}

absl::Status ResolveDataPipeline(const v1::DataPipeline& spec, int64_t batch_cells,
                                 unsigned hardware_threads, RankPlan* plan) {
  if (spec.prefetch_batches() < 0) {
    return Bad("spec.data_pipeline.prefetch_batches", "must be >= 0 (0 = automatic)");
  }
  if (spec.loader_threads() < 0) {
    return Bad("spec.data_pipeline.loader_threads", "must be >= 0 (0 = automatic)");
  }
  constexpr int64_t kQueueBytes = int64_t{512} << 20;
  const int64_t batch_bytes = std::max<int64_t>(1, batch_cells) * 4;
  plan->prefetch_batches =
      spec.prefetch_batches() > 0
          ? spec.prefetch_batches()
          : static_cast<int>(std::clamp<int64_t>(kQueueBytes / batch_bytes, 1, 4));
  plan->loader_threads =
      spec.loader_threads() > 0 ? spec.loader_threads() : (hardware_threads >= 4 ? 2 : 1);
  return absl::OkStatus();
}

namespace {

// The assignment's own fields: job, world, rank, rendezvous, threads, and no resume yet.
absl::Status CheckAssignment(const v1::Assignment& a) {
  if (a.job_id().empty()) return Bad("assignment.job_id", "is empty");
  if (a.world_size() < 1 || a.world_size() > 256) {
    return Bad("assignment.world_size", absl::StrCat(a.world_size(), " is not in 1..256"));
  }
  if (a.rank() < 0 || a.rank() >= a.world_size()) {
    return Bad("assignment.rank", absl::StrCat(a.rank(), " is not in 0..", a.world_size() - 1,
                                               " (world_size ", a.world_size(), ")"));
  }
  if (a.world_size() > 1) {
    if (a.rendezvous_host().empty()) {
      return Bad("assignment.rendezvous_host", "is empty but world_size > 1");
    }
    if (a.rendezvous_port() < 1 || a.rendezvous_port() > 65535) {
      return Bad("assignment.rendezvous_port", absl::StrCat(a.rendezvous_port(), " is not a port"));
    }
  }
  if (a.threads() < 0) return Bad("assignment.threads", "must be >= 0");
  if (a.attempt() < 0) return Bad("assignment.attempt", "must be >= 0");
  if (a.collective_timeout_ms() < 0) {
    return Bad("assignment.collective_timeout_ms", "must be >= 0 (0 = the worker's default)");
  }
  for (const auto& [field, sha] :
       {std::pair<const char*, const std::string&>{"assignment.resume_checkpoint_sha256",
                                                   a.resume_checkpoint_sha256()},
        std::pair<const char*, const std::string&>{"assignment.initial_checkpoint_sha256",
                                                   a.initial_checkpoint_sha256()}}) {
    if (!sha.empty() && !IsSha256Hex(sha)) {
      return Bad(field, absl::StrCat("\"", sha, "\" is not a sha256 (64 hex digits)"));
    }
  }
  return absl::OkStatus();
}

// The spec's world size (when given) and its dataset reference.
absl::Status CheckSpecWorldAndDataset(const v1::JobSpec& spec, int world_size) {
  if (spec.world_size() != 0 && spec.world_size() != world_size) {
    return Bad("spec.world_size",
               absl::StrCat(spec.world_size(), " but the assignment says ", world_size));
  }
  if (spec.dataset().empty()) return Bad("spec.dataset", "is empty");
  if (!absl::StartsWith(spec.dataset(), "ds-") && !absl::StartsWith(spec.dataset(), "toymc:") &&
      !absl::StartsWith(spec.dataset(), "file://")) {
    return Bad("spec.dataset", absl::StrCat("\"", spec.dataset(),
                                            "\" is not ds-<id>, toymc:<spec> or file:///path.h5"));
  }
  return absl::OkStatus();
}

absl::Status ApplyModelOverrides(const v1::ModelOverrides& o, gan::ModelConfig* m) {
  if (o.latent_size() < 0 || o.generator_filters() < 0 || o.discriminator_filters() < 0) {
    return Bad("spec.model_overrides", "values must be >= 0 (0 = preset default)");
  }
  if (o.latent_size() > 0) m->latent = o.latent_size();
  if (o.generator_filters() > 0) m->generator_filters[0] = o.generator_filters();
  if (o.discriminator_filters() > 0) m->discriminator_filters[0] = o.discriminator_filters();
  return absl::OkStatus();
}

absl::Status ApplyLossWeights(const v1::LossWeights& w, gan::ModelConfig* m) {
  if (w.adversarial() < 0 || w.energy() < 0 || w.angle() < 0 || w.ecal_sum() < 0) {
    return Bad("spec.hyper_parameters.loss_weights", "must be >= 0 (0 = preset default)");
  }
  // Order of ModelConfig::loss_weights: [BCE, E, ecal] or [BCE, E, theta, ecal].
  if (w.adversarial() > 0) m->loss_weights[0] = w.adversarial();
  if (w.energy() > 0) m->loss_weights[1] = w.energy();
  if (m->variable_angle() && w.angle() > 0) m->loss_weights[2] = w.angle();
  if (w.ecal_sum() > 0) m->loss_weights.back() = w.ecal_sum();
  return absl::OkStatus();
}

// Checks the hyper-parameters and applies those that override the model preset.
// A baseline-* preset has no optimiser step: its epochs may be 0 (ignored).
absl::Status ApplyHyperParameters(const v1::HyperParameters& h, bool baseline,
                                  gan::ModelConfig* m) {
  if (h.epochs() < (baseline ? 0 : 1) || h.epochs() > 10000) {
    return Bad("spec.hyper_parameters.epochs", absl::StrCat(h.epochs(), " is not in 1..10000"));
  }
  if (h.batch_per_rank() < 0 || h.batch_per_rank() > 4096) {
    return Bad("spec.hyper_parameters.batch_per_rank",
               absl::StrCat(h.batch_per_rank(), " is not in 1..4096"));
  }
  if (!(h.learning_rate() >= 0)) {
    return Bad("spec.hyper_parameters.learning_rate", "must be > 0 (0 = preset default)");
  }
  if (h.learning_rate() > 0) m->learning_rate = h.learning_rate();
  if (!h.optimizer().empty() && h.optimizer() != "rmsprop") {
    return Bad("spec.hyper_parameters.optimizer",
               absl::StrCat("\"", h.optimizer(),
                            "\" is not supported by this worker; use \"rmsprop\" (the 3DGAN "
                            "reference optimiser)"));
  }
  if (!(h.label_flip_probability() >= 0 && h.label_flip_probability() < 1)) {
    return Bad("spec.hyper_parameters.label_flip_probability", "must be in [0, 1)");
  }
  if (h.label_flip_probability() > 0) m->label_flip = h.label_flip_probability();
  if (h.generator_steps_per_discriminator_step() < 0 ||
      h.generator_steps_per_discriminator_step() > 100) {
    return Bad("spec.hyper_parameters.generator_steps_per_discriminator_step",
               "must be in 1..100 (0 = preset default)");
  }
  if (h.generator_steps_per_discriminator_step() > 0) {
    m->generator_steps = h.generator_steps_per_discriminator_step();
  }
  if (h.has_loss_weights()) RETURN_IF_ERROR(ApplyLossWeights(h.loss_weights(), m));
  if (h.warmup_epochs() < 0) return Bad("spec.hyper_parameters.warmup_epochs", "must be >= 0");
  return absl::OkStatus();
}

// The model: the preset with the spec's overrides and hyper-parameters applied, validated.
// A baseline-* preset resolves to 3dgan-25's config (its grid, layout and data normalisation),
// named after the baseline.
absl::StatusOr<gan::ModelConfig> ResolveModel(const v1::JobSpec& spec) {
  const bool baseline = baseline::BaselineKindOfPreset(spec.model_preset()).has_value();
  absl::StatusOr<gan::ModelConfig> preset =
      gan::PresetConfig(baseline ? "3dgan-25" : spec.model_preset());
  if (!preset.ok()) {
    return Bad("spec.model_preset",
               absl::StrCat(preset.status().message(), ", baseline-template, baseline-spots"));
  }
  gan::ModelConfig& m = *preset;
  if (baseline) m.preset = spec.model_preset();
  RETURN_IF_ERROR(ApplyModelOverrides(spec.model_overrides(), &m));
  RETURN_IF_ERROR(ApplyHyperParameters(spec.hyper_parameters(), baseline, &m));
  if (absl::Status s = gan::ValidateModelConfig(m); !s.ok()) {
    return Bad("spec.model_overrides", std::string(s.message()));
  }
  return m;
}

absl::Status ResolveValidation(const v1::ValidationSettings& v, RankPlan* plan) {
  plan->validation = !v.disabled();
  plan->holdout_fraction = v.holdout_fraction() > 0 ? v.holdout_fraction() : 0.1;
  if (v.disabled()) plan->holdout_fraction = 0;
  if (!(plan->holdout_fraction >= 0 && plan->holdout_fraction < 1)) {
    return Bad("spec.validation.holdout_fraction",
               absl::StrCat(v.holdout_fraction(), " is not in (0, 1)"));
  }
  if (v.energy_bin_half_width() < 0 || v.showers_per_bin() < 0) {
    return Bad("spec.validation", "energy_bin_half_width and showers_per_bin must be >= 0");
  }
  for (double e : v.energies()) {
    if (!(e > 0)) return Bad("spec.validation.energies", "every energy must be > 0 GeV");
  }
  return absl::OkStatus();
}

absl::Status ResolveCheckpointPolicy(const v1::CheckpointPolicy& c, RankPlan* plan) {
  if (c.every_epochs() < 0 || c.keep_last() < 0) {
    return Bad("spec.checkpoint_policy", "every_epochs and keep_last must be >= 0");
  }
  if (c.every_steps() < 0 || c.every_steps() > 1000000) {
    return Bad("spec.checkpoint_policy.every_steps",
               absl::StrCat(c.every_steps(), " is not in 0..1000000 (0 = off)"));
  }
  if (!(c.every_minutes() >= 0 && c.every_minutes() <= 10080)) {
    return Bad("spec.checkpoint_policy.every_minutes",
               absl::StrCat(c.every_minutes(), " is not in 0..10080 (0 = off)"));
  }
  plan->checkpoint_every_epochs = c.every_epochs();
  plan->checkpoint_every_steps = c.every_steps();
  plan->checkpoint_every_minutes = c.every_minutes();
  plan->keep_last = std::max(1, c.keep_last());
  if (c.keep_best() && !plan->validation) {
    return Bad("spec.checkpoint_policy.keep_best",
               "needs validation (spec.validation.disabled is set): the best checkpoint is chosen "
               "by its validation figure of merit");
  }
  plan->keep_best = c.keep_best();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RankPlan> PlanRank(const v1::Assignment& a) {
  RankPlan plan;
  plan.assignment = a;
  RETURN_IF_ERROR(CheckAssignment(a));
  const v1::JobSpec& spec = a.spec();
  RETURN_IF_ERROR(CheckSpecWorldAndDataset(spec, a.world_size()));
  ASSIGN_OR_RETURN(plan.model, ResolveModel(spec));
  plan.baseline = baseline::BaselineKindOfPreset(spec.model_preset());
  if (plan.baseline.has_value()) {
    if (a.world_size() != 1) {
      return Bad("spec.world_size",
                 absl::StrCat(a.world_size(), ": a baseline (", spec.model_preset(),
                              ") is fitted by one rank; set 1"));
    }
    if (!a.initial_checkpoint_sha256().empty()) {
      return Bad("spec.initial_model",
                 absl::StrCat("a baseline (", spec.model_preset(), ") is fitted, not fine-tuned"));
    }
  }

  const v1::HyperParameters& h = spec.hyper_parameters();
  plan.epochs = h.epochs();
  plan.batch_per_rank = h.batch_per_rank();
  plan.seed = h.seed();
  plan.threads = a.threads();
  plan.scale_lr_with_world_size = h.scale_lr_with_world_size();
  plan.warmup_epochs = h.warmup_epochs();
  if (!(h.lr_decay_to() >= 0 && h.lr_decay_to() <= 1)) {
    return Bad("spec.hyper_parameters.lr_decay_to", "must be in [0, 1] (0 = constant)");
  }
  plan.lr_decay_to = h.lr_decay_to() > 0 ? h.lr_decay_to() : 1.0;

  const gan::ModelConfig& m = plan.model;
  const int64_t batch = plan.batch_per_rank > 0 ? plan.batch_per_rank : m.default_batch;
  RETURN_IF_ERROR(ResolveDataPipeline(spec.data_pipeline(),
                                      batch * m.grid[0] * m.grid[1] * m.grid[2],
                                      std::thread::hardware_concurrency(), &plan));
  RETURN_IF_ERROR(ResolveValidation(spec.validation(), &plan));
  if (spec.has_data_split()) {
    const v1::DataSplit& split = spec.data_split();
    if (split.folds() < 2 || split.folds() > 20) {
      return Bad("spec.data_split.folds", absl::StrCat(split.folds(), " is not in 2..20"));
    }
    if (split.validation_fold() < 0 || split.validation_fold() >= split.folds()) {
      return Bad("spec.data_split.validation_fold",
                 absl::StrCat(split.validation_fold(), " is not in 0..", split.folds() - 1));
    }
    if (!plan.validation) {
      return Bad("spec.data_split", "needs validation (spec.validation.disabled is set)");
    }
    plan.folds = split.folds();
    plan.validation_fold = split.validation_fold();
    plan.split_seed = split.seed();
  }
  RETURN_IF_ERROR(ResolveCheckpointPolicy(spec.checkpoint_policy(), &plan));
  return plan;
}

}  // namespace gantry::runner
