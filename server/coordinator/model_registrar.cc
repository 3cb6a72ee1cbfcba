#include "server/coordinator/model_registrar.h"

#include <iterator>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/requests/field_checks.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

// The name a job's model is registered under: spec.model_name, else a display name that is a valid
// model name, else the job id.
std::string ModelNameOf(const std::string& job_id, const v1::JobSpec& spec) {
  if (!spec.model_name().empty()) return spec.model_name();
  if (ValidateModelName(spec.display_name(), "display_name").ok()) return spec.display_name();
  return job_id;
}

std::map<std::string, std::string> HyperParameterMap(const v1::JobSpec& spec) {
  const v1::HyperParameters& h = spec.hyper_parameters();
  std::map<std::string, std::string> m;
  m["epochs"] = absl::StrCat(h.epochs());
  m["batch_per_rank"] = absl::StrCat(h.batch_per_rank());
  m["learning_rate"] = absl::StrCat(h.learning_rate());
  m["optimizer"] = h.optimizer().empty() ? "rmsprop" : h.optimizer();
  m["seed"] = absl::StrCat(h.seed());
  m["scale_lr_with_world_size"] = h.scale_lr_with_world_size() ? "true" : "false";
  m["warmup_epochs"] = absl::StrCat(h.warmup_epochs());
  m["label_flip_probability"] = absl::StrCat(h.label_flip_probability());
  m["generator_steps_per_discriminator_step"] =
      absl::StrCat(h.generator_steps_per_discriminator_step());
  if (h.has_loss_weights()) {
    const v1::LossWeights& w = h.loss_weights();
    m["loss_weights"] =
        absl::StrCat(w.adversarial(), ",", w.energy(), ",", w.angle(), ",", w.ecal_sum());
  }
  return m;
}

// A worker's account of its generator, bounded before the registry keeps it: three grid sizes in
// 1..4096 and a latent width in 1..65536 (anything else is dropped: the version then has no card
// on GetModel, its exports still do).
bool PlausibleInterface(const v1::GeneratorInterface& g) {
  if (g.grid_size() != 3 || g.latent_size() < 1 || g.latent_size() > 65536) return false;
  for (int64_t n : g.grid()) {
    if (n < 1 || n > 4096) return false;
  }
  return true;
}

// The job's spec and the rank's result as a catalog entry (not yet registered).
v1::ModelVersion ModelVersionOf(const std::string& job_id, const std::string& owner,
                                const v1::JobSpec& spec, const v1::JobResult& result,
                                int64_t checkpoint_size) {
  v1::ModelVersion m;
  m.set_name(ModelNameOf(job_id, spec));
  m.set_owner(owner);
  m.set_visibility(spec.model_visibility() == v1::VISIBILITY_PUBLIC ? v1::VISIBILITY_PUBLIC
                                                                    : v1::VISIBILITY_PRIVATE);
  m.set_description(spec.display_name().empty()
                        ? absl::StrCat(spec.model_preset(), " trained by ", job_id)
                        : spec.display_name());
  m.mutable_tags()->insert(spec.labels().begin(), spec.labels().end());
  v1::Lineage* lineage = m.mutable_lineage();
  lineage->set_job_id(job_id);
  lineage->set_dataset(spec.dataset());
  lineage->set_dataset_sha256(result.dataset_sha256());
  // The spec's values, then what the rank resolved (preset defaults in place of zeros).
  for (const auto& [k, v] : HyperParameterMap(spec)) {
    (*lineage->mutable_hyper_parameters())[k] = v;
  }
  for (const auto& [k, v] : result.hyper_parameters()) {
    (*lineage->mutable_hyper_parameters())[k] = v;
  }
  lineage->set_world_size(spec.world_size());
  lineage->set_code_version(result.code_version());
  lineage->set_parent_model(spec.initial_model());
  lineage->set_model_preset(spec.model_preset());
  m.mutable_metrics()->insert(result.metrics().begin(), result.metrics().end());
  *m.mutable_histograms() = result.histograms();
  m.set_checkpoint_sha256(result.checkpoint_sha256());
  m.set_checkpoint_size_bytes(checkpoint_size);
  m.set_particle(result.particle());
  *m.mutable_energy_range_gev() = result.energy_range_gev();
  *m.mutable_theta_range_rad() = result.theta_range_rad();
  if (PlausibleInterface(result.generator())) *m.mutable_generator() = result.generator();
  *m.mutable_bf16() = result.bf16();
  if (m.bf16().reason().size() > 1000) m.mutable_bf16()->mutable_reason()->resize(1000);
  return m;
}

}  // namespace

absl::StatusOr<ModelRegistrar::RegisteredCheckpoint> ModelRegistrar::Choose(
    const std::string& job_id, const v1::JobSpec& spec, const v1::JobResult& result,
    const v1::CheckpointSaved& final_checkpoint) {
  RegisteredCheckpoint chosen{result, final_checkpoint};
  if (!spec.checkpoint_policy().register_best()) return chosen;
  // The lowest fom of the checkpoints retention kept; ties go to the newest, so the final
  // checkpoint stays the model unless an earlier one scored strictly better.
  ASSIGN_OR_RETURN(std::optional<v1::CheckpointSaved> best, jobs_.BestCheckpoint(job_id));
  if (!best.has_value() || best->sha256() == final_checkpoint.sha256()) return chosen;
  // Its validation point has the metrics and histograms the version is registered with (the rank
  // reports it before the upload that carries the fom).
  absl::StatusOr<v1::ValidationPoint> point = jobs_.GetValidationPoint(job_id, best->step());
  if (absl::IsNotFound(point.status())) return chosen;  // a curve point lost: the final one
  RETURN_IF_ERROR(point.status());
  v1::JobResult& r = chosen.result;
  r.set_checkpoint_sha256(best->sha256());
  r.set_checkpoint_size_bytes(best->size_bytes());
  // Training figures (data_stall_fraction) stay; every validation figure is the point's.
  auto* metrics = r.mutable_metrics();
  for (auto it = metrics->begin(); it != metrics->end();) {
    it = it->first == "data_stall_fraction" ? std::next(it) : metrics->erase(it);
  }
  metrics->insert(point->metrics().begin(), point->metrics().end());
  *r.mutable_histograms() = point->histograms();
  // The BF16 check compared the final model's two precisions, not this one's.
  r.mutable_bf16()->set_state(v1::Bf16Check::STATE_NOT_CHECKED);
  r.mutable_bf16()->set_reason(
      absl::StrCat("the BF16 check ran on the final checkpoint (step ", final_checkpoint.step(),
                   "); checkpoint_policy.register_best registered the one of step ", best->step()));
  chosen.checkpoint = *best;
  return chosen;
}

absl::StatusOr<std::string> ModelRegistrar::Register(const std::string& job_id,
                                                     const std::string& owner,
                                                     const v1::JobSpec& spec,
                                                     const v1::JobResult& result) {
  RETURN_IF_ERROR(ValidateSha256(result.checkpoint_sha256(), "result.checkpoint_sha256"));
  // Only a checkpoint this job uploaded: never another job's (another tenant's) checkpoint or a
  // dataset blob that a worker names.
  ASSIGN_OR_RETURN(std::optional<v1::CheckpointSaved> final_checkpoint,
                   jobs_.FindCheckpoint(job_id, result.checkpoint_sha256()));
  if (!final_checkpoint.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("result.checkpoint_sha256: ", result.checkpoint_sha256(),
                     " is not a checkpoint job ", job_id, " uploaded; a job registers its own"));
  }
  ASSIGN_OR_RETURN(RegisteredCheckpoint chosen, Choose(job_id, spec, result, *final_checkpoint));
  const v1::JobResult& registered = chosen.result;
  ASSIGN_OR_RETURN(int64_t size, blobs_.Size(registered.checkpoint_sha256()));
  if (size != registered.checkpoint_size_bytes()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", registered.checkpoint_sha256(), " has ", size,
                     " bytes stored but the result says ", registered.checkpoint_size_bytes()));
  }
  v1::ModelVersion version = ModelVersionOf(job_id, owner, spec, registered, size);
  version.mutable_lineage()->set_checkpoint_step(chosen.checkpoint.step());
  version.mutable_lineage()->set_checkpoint_epoch(chosen.checkpoint.epoch());
  // A study's trial job: its study and trial go into the lineage (the labels are the user's to
  // set, so the study's own record of the job decides).
  if (spec.labels().count("study")) {
    ASSIGN_OR_RETURN(std::optional<storage::StudyRepository::TrialRef> trial,
                     studies_.TrialOfJob(job_id));
    if (trial.has_value()) {
      version.mutable_lineage()->set_study_id(trial->study_id);
      version.mutable_lineage()->set_study_trial(trial->number);
    }
  }
  ASSIGN_OR_RETURN(v1::ModelVersion stored, models_.Register(version));
  const std::string model_ref = absl::StrCat(stored.name(), ":", stored.version());
  RETURN_IF_ERROR(jobs_.SetModelRef(job_id, model_ref));
  v1::JobEvent event;
  event.mutable_model_registered()->set_model_ref(model_ref);
  event.mutable_model_registered()->mutable_metrics()->insert(registered.metrics().begin(),
                                                              registered.metrics().end());
  RETURN_IF_ERROR(jobs_.AppendEvent(job_id, event).status());
  return model_ref;
}

}  // namespace gantry::server
