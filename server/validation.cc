#include "server/validation.h"

#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "showers/toy_mc.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

std::string Sub(absl::string_view parent, absl::string_view child) {
  return absl::StrCat(parent, ".", child);
}

bool AllChars(absl::string_view s, absl::string_view extra) {
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        extra.find(c) == absl::string_view::npos) {
      return false;
    }
  }
  return true;
}

absl::Status CheckInt(int64_t value, int64_t min, int64_t max, absl::string_view field) {
  if (value < min || value > max) {
    return Invalid(field, absl::StrCat("is ", value, "; set it to a value in ", min, "..", max));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(double value, absl::string_view field) {
  if (!std::isfinite(value)) {
    return Invalid(field, absl::StrCat("is ", value, "; it must be a finite number"));
  }
  return absl::OkStatus();
}

absl::Status CheckRange01(double value, double max_exclusive, absl::string_view field) {
  RETURN_IF_ERROR(CheckFinite(value, field));
  if (value < 0 || value >= max_exclusive) {
    return Invalid(field, absl::StrCat("is ", value, "; it must be in [0, ", max_exclusive, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckParticle(v1::Particle particle, absl::string_view field) {
  if (!v1::Particle_IsValid(particle)) {
    return Invalid(field,
                   absl::StrCat("is ", static_cast<int>(particle), ", not a known Particle value"));
  }
  return absl::OkStatus();
}

absl::Status ValidateHyperParameters(const v1::HyperParameters& hp, absl::string_view f) {
  if (hp.epochs() == 0) {
    return Invalid(Sub(f, "epochs"), absl::StrCat("is missing; set it to 1..", kMaxEpochs));
  }
  RETURN_IF_ERROR(CheckInt(hp.epochs(), 1, kMaxEpochs, Sub(f, "epochs")));
  if (hp.batch_per_rank() == 0) {
    return Invalid(Sub(f, "batch_per_rank"),
                   absl::StrCat("is missing; set it to 1..", kMaxBatchPerRank));
  }
  RETURN_IF_ERROR(CheckInt(hp.batch_per_rank(), 1, kMaxBatchPerRank, Sub(f, "batch_per_rank")));
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

absl::StatusOr<ModelRef> ParseModelRef(absl::string_view ref, absl::string_view field) {
  if (ref.empty()) {
    return Invalid(field, "is missing; give a model as \"name:version\" or \"name@alias\"");
  }
  ModelRef out;
  const size_t slash = ref.find('/');
  if (slash != absl::string_view::npos) {
    out.owner = std::string(ref.substr(0, slash));
    RETURN_IF_ERROR(ValidateTenantName(out.owner, field));
    ref = ref.substr(slash + 1);
  }
  const size_t at = ref.find('@');
  const size_t colon = ref.rfind(':');
  if (at != absl::string_view::npos) {
    out.name = std::string(ref.substr(0, at));
    out.alias = std::string(ref.substr(at + 1));
    RETURN_IF_ERROR(ValidateModelName(out.name, field));
    RETURN_IF_ERROR(ValidateAlias(out.alias, field));
    return out;
  }
  if (colon == absl::string_view::npos) {
    return Invalid(field, absl::StrCat("\"", ref,
                                       "\" is not a model reference; use \"name:version\" (e.g. "
                                       "\"calo:3\") or \"name@alias\""));
  }
  out.name = std::string(ref.substr(0, colon));
  RETURN_IF_ERROR(ValidateModelName(out.name, field));
  const absl::string_view version = ref.substr(colon + 1);
  if (!absl::SimpleAtoi(version, &out.version) || out.version <= 0 || !AllChars(version, "")) {
    return Invalid(field, absl::StrCat("version \"", version, "\" in \"", ref,
                                       "\" must be a positive integer"));
  }
  return out;
}

absl::StatusOr<DatasetRefKind> ValidateDatasetRef(absl::string_view ref, absl::string_view preset,
                                                  absl::string_view field) {
  if (ref.empty()) {
    return Invalid(field,
                   "is missing; give \"ds-<id>\" (an uploaded dataset), \"toymc:<key=value,...>\" "
                   "or \"file:///absolute/path.h5\"");
  }
  if (absl::StartsWith(ref, "ds-")) {
    RETURN_IF_ERROR(ValidateId(ref, "ds-", field));
    return DatasetRefKind::kUploaded;
  }
  if (absl::StartsWith(ref, "toymc:")) {
    absl::StatusOr<showers::ToyMcConfig> config =
        showers::ParseToyMcSpec(std::string_view(ref.data(), ref.size()));
    if (!config.ok()) return Invalid(field, config.status().message());
    absl::Status valid = showers::ValidateToyMcConfig(*config);
    if (!valid.ok()) return Invalid(field, valid.message());
    const bool fixed = config->layout == showers::Layout::kFixedAngle3DGan;
    if ((preset == "3dgan-25" && !fixed) || (preset == "3dgan-51" && fixed)) {
      return Invalid(field, absl::StrCat("toy Monte Carlo layout does not fit model_preset \"",
                                         preset, "\"; use layout=", fixed ? "51" : "25"));
    }
    return DatasetRefKind::kToyMc;
  }
  if (absl::StartsWith(ref, "file://")) {
    const absl::string_view path = ref.substr(7);
    if (path.empty() || path[0] != '/') {
      return Invalid(field,
                     absl::StrCat("\"", ref, "\" must name an absolute path: file:///dir/file.h5"));
    }
    if (path.find("/../") != absl::string_view::npos || absl::EndsWith(path, "/..")) {
      return Invalid(field, "file:// paths must not contain \"..\"");
    }
    return DatasetRefKind::kFile;
  }
  return Invalid(field, absl::StrCat("\"", ref,
                                     "\" is not a dataset reference; use \"ds-<id>\", "
                                     "\"toymc:<key=value,...>\" or \"file:///path.h5\""));
}

absl::Status ValidateModelName(absl::string_view name, absl::string_view field) {
  if (name.empty() || name.size() > 128 || !absl::ascii_isalnum(name[0]) ||
      !AllChars(name, "._-")) {
    return Invalid(field, absl::StrCat("model name \"", name,
                                       "\" is invalid; use 1-128 characters [A-Za-z0-9._-] "
                                       "starting with a letter or digit"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAlias(absl::string_view alias, absl::string_view field) {
  bool ok = !alias.empty() && alias.size() <= 63 && absl::ascii_islower(alias[0]);
  for (char c : alias) {
    ok = ok && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '-');
  }
  if (!ok) {
    return Invalid(field, absl::StrCat("alias \"", alias,
                                       "\" is invalid; use [a-z][a-z0-9_-]{0,62}, e.g. "
                                       "\"champion\""));
  }
  return absl::OkStatus();
}

absl::Status ValidateTenantName(absl::string_view name, absl::string_view field) {
  bool ok = !name.empty() && name.size() <= 63 && absl::ascii_islower(name[0]);
  for (char c : name) ok = ok && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-');
  if (!ok) {
    return Invalid(field,
                   absl::StrCat("tenant name \"", name, "\" is invalid; use [a-z][a-z0-9-]{0,62}"));
  }
  return absl::OkStatus();
}

absl::Status ValidateDatasetName(absl::string_view name, absl::string_view field) {
  if (name.empty() || name.size() > 128 || !AllChars(name, "._-")) {
    return Invalid(field, absl::StrCat("dataset name \"", name,
                                       "\" is invalid; use 1-128 characters [A-Za-z0-9._-]"));
  }
  if (absl::StartsWith(name, "ds-")) {
    return Invalid(field,
                   absl::StrCat("dataset name \"", name,
                                "\" starts with \"ds-\", which marks dataset ids; rename it"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLabels(const google::protobuf::Map<std::string, std::string>& labels,
                            absl::string_view field) {
  if (static_cast<int>(labels.size()) > kMaxLabels) {
    return Invalid(field,
                   absl::StrCat("has ", labels.size(), " entries; give at most ", kMaxLabels));
  }
  for (const auto& [key, value] : labels) {
    if (key.empty() || key.size() > 63 || !AllChars(key, "._/-")) {
      return Invalid(
          field, absl::StrCat("key \"", key, "\" is invalid; use 1-63 characters [A-Za-z0-9._/-]"));
    }
    if (value.size() > 256) {
      return Invalid(absl::StrCat(field, "[", key, "]"), "is longer than 256 characters");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSha256(absl::string_view hex, absl::string_view field) {
  bool ok = hex.size() == 64;
  for (char c : hex) ok = ok && (absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'));
  if (!ok) return Invalid(field, "must be 64 lower-case hex digits (a SHA-256)");
  return absl::OkStatus();
}

absl::Status ValidateId(absl::string_view id, absl::string_view prefix, absl::string_view field) {
  if (id.empty()) return Invalid(field, absl::StrCat("is missing; give an id \"", prefix, "...\""));
  if (!absl::StartsWith(id, prefix) || id.size() == prefix.size() ||
      id.size() > prefix.size() + 64 || !AllChars(id.substr(prefix.size()), "-")) {
    return Invalid(field, absl::StrCat("\"", id, "\" is not a valid id; ids look like \"", prefix,
                                       "<uuid>\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ValidatePage(const v1::PageRequest& page, absl::string_view field) {
  if (page.page_size() < 0 || page.page_size() > kMaxPageSize) {
    return Invalid(Sub(field, "page_size"),
                   absl::StrCat("is ", page.page_size(), "; use 0 (default ", kDefaultPageSize,
                                ") to ", kMaxPageSize));
  }
  if (page.page_token().size() > 1024) {
    return Invalid(Sub(field, "page_token"), "is too long; pass back next_page_token unchanged");
  }
  return page.page_size() == 0 ? kDefaultPageSize : page.page_size();
}

absl::Status ValidateDescription(absl::string_view description, absl::string_view field) {
  if (description.size() > 1024) return Invalid(field, "is longer than 1024 characters");
  return absl::OkStatus();
}

absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  if (spec.display_name().size() > 256) {
    return Invalid("spec.display_name", "is longer than 256 characters");
  }
  RETURN_IF_ERROR(ValidateLabels(spec.labels(), "spec.labels"));
  const std::string& preset = spec.model_preset();
  if (preset.empty()) {
    return Invalid("spec.model_preset", "is missing; use \"3dgan-25\", \"3dgan-51\" or \"tiny\"");
  }
  if (preset != "3dgan-25" && preset != "3dgan-51" && preset != "tiny") {
    return Invalid("spec.model_preset", absl::StrCat("\"", preset,
                                                     "\" is unknown; use \"3dgan-25\", "
                                                     "\"3dgan-51\" or \"tiny\""));
  }
  const v1::ModelOverrides& mo = spec.model_overrides();
  RETURN_IF_ERROR(CheckInt(mo.latent_size(), 0, 4096, "spec.model_overrides.latent_size"));
  RETURN_IF_ERROR(
      CheckInt(mo.generator_filters(), 0, 1024, "spec.model_overrides.generator_filters"));
  RETURN_IF_ERROR(
      CheckInt(mo.discriminator_filters(), 0, 1024, "spec.model_overrides.discriminator_filters"));
  RETURN_IF_ERROR(ValidateDatasetRef(spec.dataset(), preset, "spec.dataset").status());
  RETURN_IF_ERROR(ValidateHyperParameters(spec.hyper_parameters(), "spec.hyper_parameters"));
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
  RETURN_IF_ERROR(CheckInt(r.threads(), 0, 1024, "spec.resources_per_rank.threads"));
  RETURN_IF_ERROR(ValidateLabels(spec.worker_selector(), "spec.worker_selector"));
  RETURN_IF_ERROR(CheckInt(spec.priority(), -100, 100, "spec.priority"));
  const v1::CheckpointPolicy& cp = spec.checkpoint_policy();
  RETURN_IF_ERROR(
      CheckInt(cp.every_epochs(), 0, kMaxEpochs, "spec.checkpoint_policy.every_epochs"));
  RETURN_IF_ERROR(CheckInt(cp.keep_last(), 0, 1000, "spec.checkpoint_policy.keep_last"));
  if (cp.keep_best()) {
    return Invalid("spec.checkpoint_policy.keep_best",
                   "is not implemented yet (checkpoints are not scored during training); leave it "
                   "false: the registered model is the final checkpoint, with its validation "
                   "metrics");
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

absl::Status ValidateGenerateRequest(const v1::GenerateRequest& request, int64_t max_showers) {
  RETURN_IF_ERROR(ParseModelRef(request.model(), "model").status());
  switch (request.conditions_case()) {
    case v1::GenerateRequest::kList: {
      const auto& items = request.list().items();
      if (items.empty()) return Invalid("list.items", "is empty; give at least one condition");
      if (items.size() > max_showers) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "list.items: ", items.size(), " showers requested; the maximum is ", max_showers,
            " per request (gantry-server --max-showers-per-request); split it"));
      }
      for (int i = 0; i < items.size(); ++i) {
        const std::string e = absl::StrCat("list.items[", i, "].energy_gev");
        RETURN_IF_ERROR(CheckFinite(items[i].energy_gev(), e));
        if (items[i].energy_gev() <= 0) {
          return Invalid(e,
                         absl::StrCat("is ", items[i].energy_gev(), "; energies must be > 0 GeV"));
        }
        const std::string t = absl::StrCat("list.items[", i, "].theta_rad");
        RETURN_IF_ERROR(CheckFinite(items[i].theta_rad(), t));
        if (items[i].theta_rad() < 0 || items[i].theta_rad() > M_PI) {
          return Invalid(t,
                         absl::StrCat("is ", items[i].theta_rad(), "; angles must be in [0, pi]"));
        }
      }
      break;
    }
    case v1::GenerateRequest::kRange: {
      const v1::ConditionRange& r = request.range();
      if (!r.has_energy_gev()) return Invalid("range.energy_gev", "is missing; give min and max");
      RETURN_IF_ERROR(CheckFinite(r.energy_gev().min(), "range.energy_gev.min"));
      RETURN_IF_ERROR(CheckFinite(r.energy_gev().max(), "range.energy_gev.max"));
      if (r.energy_gev().min() <= 0) return Invalid("range.energy_gev.min", "must be > 0 GeV");
      if (r.energy_gev().max() < r.energy_gev().min()) {
        return Invalid("range.energy_gev", "max is below min");
      }
      if (r.has_theta_rad()) {
        RETURN_IF_ERROR(CheckFinite(r.theta_rad().min(), "range.theta_rad.min"));
        RETURN_IF_ERROR(CheckFinite(r.theta_rad().max(), "range.theta_rad.max"));
        if (r.theta_rad().min() < 0 || r.theta_rad().max() > M_PI ||
            r.theta_rad().max() < r.theta_rad().min()) {
          return Invalid("range.theta_rad", "must satisfy 0 <= min <= max <= pi");
        }
      }
      if (r.count() <= 0) {
        return Invalid("range.count",
                       absl::StrCat("is ", r.count(), "; ask for 1..", max_showers, " showers"));
      }
      if (r.count() > max_showers) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "range.count: ", r.count(), " showers requested; the maximum is ", max_showers,
            " per request (gantry-server --max-showers-per-request); split it"));
      }
      break;
    }
    default:
      return Invalid("conditions", "are missing; set either list or range");
  }
  RETURN_IF_ERROR(CheckParticle(request.particle(), "particle"));
  if (!v1::Precision_IsValid(request.precision())) {
    return Invalid("precision", "is not a known Precision; use FP32 or BF16");
  }
  return CheckInt(request.chunk_showers(), 0, kMaxChunkShowers, "chunk_showers");
}

absl::Status ValidateGenerateForModel(const v1::GenerateRequest& request,
                                      const v1::ModelVersion& model) {
  const std::string ref = absl::StrCat(model.name(), ":", model.version());
  if (model.status() == v1::MODEL_ARCHIVED) {
    return absl::FailedPreconditionError(
        absl::StrCat("model: ", ref, " is archived; generate from a ready version"));
  }
  if (request.particle() != v1::PARTICLE_UNSPECIFIED &&
      model.particle() != v1::PARTICLE_UNSPECIFIED && request.particle() != model.particle()) {
    return Invalid("particle",
                   absl::StrCat("is ", v1::Particle_Name(request.particle()), " but ", ref,
                                " was trained on ", v1::Particle_Name(model.particle())));
  }
  const bool has_e = model.has_energy_range_gev() && model.energy_range_gev().max() > 0;
  const bool has_t = model.has_theta_range_rad() && model.theta_range_rad().max() > 0;
  const double emin = model.energy_range_gev().min(), emax = model.energy_range_gev().max();
  const double tmin = model.theta_range_rad().min(), tmax = model.theta_range_rad().max();
  auto energy_error = [&](absl::string_view field, double e) {
    return Invalid(field, absl::StrCat(e, " GeV is outside the training range of ", ref, " [", emin,
                                       ", ", emax, "] GeV"));
  };
  auto theta_error = [&](absl::string_view field, double t) {
    return Invalid(field, absl::StrCat(t, " rad is outside the training range of ", ref, " [", tmin,
                                       ", ", tmax, "] rad"));
  };
  if (request.has_list()) {
    for (int i = 0; i < request.list().items_size(); ++i) {
      const v1::Condition& c = request.list().items(i);
      if (has_e && (c.energy_gev() < emin || c.energy_gev() > emax)) {
        return energy_error(absl::StrCat("list.items[", i, "].energy_gev"), c.energy_gev());
      }
      if (has_t && c.theta_rad() != 0 && (c.theta_rad() < tmin || c.theta_rad() > tmax)) {
        return theta_error(absl::StrCat("list.items[", i, "].theta_rad"), c.theta_rad());
      }
    }
  } else {
    const v1::ConditionRange& r = request.range();
    if (has_e && r.energy_gev().min() < emin) {
      return energy_error("range.energy_gev.min", r.energy_gev().min());
    }
    if (has_e && r.energy_gev().max() > emax) {
      return energy_error("range.energy_gev.max", r.energy_gev().max());
    }
    if (has_t && r.has_theta_rad() && r.theta_rad().min() < tmin) {
      return theta_error("range.theta_rad.min", r.theta_rad().min());
    }
    if (has_t && r.has_theta_rad() && r.theta_rad().max() > tmax) {
      return theta_error("range.theta_rad.max", r.theta_rad().max());
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateListModels(const v1::ListModelsRequest& request) {
  if (!request.name().empty()) RETURN_IF_ERROR(ValidateModelName(request.name(), "name"));
  RETURN_IF_ERROR(ValidateLabels(request.tags(), "tags"));
  for (int i = 0; i < request.metric_filters_size(); ++i) {
    const v1::MetricFilter& m = request.metric_filters(i);
    const std::string f = absl::StrCat("metric_filters[", i, "]");
    if (m.metric().empty() || m.metric().size() > 64 || !AllChars(m.metric(), "_.-")) {
      return Invalid(Sub(f, "metric"), "must name a metric such as \"fom\" ([A-Za-z0-9_.-])");
    }
    if (!m.has_min() && !m.has_max()) return Invalid(f, "sets neither min nor max");
    if (m.has_min()) RETURN_IF_ERROR(CheckFinite(m.min(), Sub(f, "min")));
    if (m.has_max()) RETURN_IF_ERROR(CheckFinite(m.max(), Sub(f, "max")));
    if (m.has_min() && m.has_max() && m.max() < m.min()) return Invalid(f, "max is below min");
  }
  const std::string& order = request.order_by();
  if (!order.empty() && order != "created_at") {
    const absl::string_view metric =
        absl::StartsWith(order, "metric:") ? absl::string_view(order).substr(7) : "";
    if (metric.empty() || !AllChars(metric, "_.-")) {
      return Invalid("order_by", absl::StrCat("\"", order,
                                              "\" is unknown; use \"created_at\" or "
                                              "\"metric:<name>\""));
    }
  }
  return ValidatePage(request.page(), "page").status();
}

absl::Status ValidateSetTags(const v1::SetTagsRequest& request) {
  RETURN_IF_ERROR(ParseModelRef(request.model(), "model").status());
  RETURN_IF_ERROR(ValidateLabels(request.set(), "set"));
  if (request.set().empty() && request.remove().empty()) {
    return Invalid("set", "and remove are both empty; give tags to set or keys to remove");
  }
  for (int i = 0; i < request.remove_size(); ++i) {
    if (request.remove(i).empty() || request.remove(i).size() > 63) {
      return Invalid(absl::StrCat("remove[", i, "]"), "must be a tag key of 1-63 characters");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateUploadHeader(const v1::UploadDatasetHeader& header, int64_t max_bytes) {
  RETURN_IF_ERROR(ValidateDatasetName(header.name(), "header.name"));
  if (header.size_bytes() <= 0) {
    return Invalid("header.size_bytes",
                   absl::StrCat("is ", header.size_bytes(), "; give the file's size in bytes"));
  }
  if (header.size_bytes() > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("header.size_bytes: ", header.size_bytes(),
                     " bytes exceeds the server's dataset limit of ", max_bytes, " bytes"));
  }
  if (!header.sha256().empty()) RETURN_IF_ERROR(ValidateSha256(header.sha256(), "header.sha256"));
  RETURN_IF_ERROR(CheckParticle(header.particle(), "header.particle"));
  if (header.file_name().size() > 255 || header.file_name().find('/') != std::string::npos) {
    return Invalid("header.file_name", "must be a base name (no '/') of at most 255 characters");
  }
  return ValidateLabels(header.labels(), "header.labels");
}

absl::Status ValidateRegister(const v1::RegisterRequest& request) {
  if (request.name().empty() || request.name().size() > 128 || !AllChars(request.name(), "._-")) {
    return Invalid("name", "must be 1-128 characters [A-Za-z0-9._-]");
  }
  RETURN_IF_ERROR(CheckInt(request.slots(), 1, 1024, "slots"));
  if (!v1::DeviceKind_IsValid(request.device())) return Invalid("device", "is not a DeviceKind");
  RETURN_IF_ERROR(CheckInt(request.threads_per_rank(), 0, 1024, "threads_per_rank"));
  RETURN_IF_ERROR(ValidateLabels(request.labels(), "labels"));
  if (request.advertise_host().empty() || request.advertise_host().size() > 255) {
    return Invalid("advertise_host", "is missing; give the host other ranks reach this worker on");
  }
  for (int i = 0; i < request.cached_datasets_size(); ++i) {
    RETURN_IF_ERROR(
        ValidateSha256(request.cached_datasets(i), absl::StrCat("cached_datasets[", i, "]")));
  }
  if (request.rendezvous_port_min() != 0 || request.rendezvous_port_max() != 0) {
    if (request.rendezvous_port_min() < 1024 || request.rendezvous_port_max() > 65535 ||
        request.rendezvous_port_max() < request.rendezvous_port_min()) {
      return Invalid("rendezvous_port_min",
                     absl::StrCat("the range ", request.rendezvous_port_min(), "..",
                                  request.rendezvous_port_max(),
                                  " is invalid; give 1024 <= min <= max <= 65535 (or 0/0 for "
                                  "the default 29400..29499)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateCheckpointHeader(const v1::CheckpointHeader& header, int64_t max_bytes) {
  RETURN_IF_ERROR(ValidateId(header.job_id(), "job-", "header.job_id"));
  RETURN_IF_ERROR(ValidateSha256(header.sha256(), "header.sha256"));
  if (header.size_bytes() <= 0 || header.size_bytes() > max_bytes) {
    return Invalid("header.size_bytes",
                   absl::StrCat("is ", header.size_bytes(), "; it must be in 1..", max_bytes));
  }
  RETURN_IF_ERROR(CheckInt(header.epoch(), 0, kMaxEpochs, "header.epoch"));
  if (header.step() < 0) return Invalid("header.step", "must be >= 0");
  return absl::OkStatus();
}

}  // namespace gantry::server
