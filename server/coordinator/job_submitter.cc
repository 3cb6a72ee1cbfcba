#include "server/coordinator/job_submitter.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/coordinator/pool_resolver.h"
#include "server/requests/field_checks.h"
#include "server/requests/training_requests.h"
#include "showers/toy_mc.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

absl::Status WithField(const absl::Status& status, absl::string_view field) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(field, ": ", status.message()));
}

}  // namespace

absl::Status JobSubmitter::CheckFileDataset(const Principal& p, const std::string& ref) const {
  const FileRoots roots = file_datasets_.RootsOf(p.tenant);
  if (roots.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "spec.dataset: tenant \"", p.tenant,
        "\" may not read file:// datasets; upload the file (gantry datasets upload) or ask the "
        "operator to allow your tenant"));
  }
  absl::StatusOr<std::string> path = roots.CheckLexical(ref.substr(7));
  if (!path.ok()) {
    return checks::Invalid("spec.dataset", absl::StrCat(path.status().message()));
  }
  return absl::OkStatus();
}

absl::Status JobSubmitter::Check(const Principal& p, const v1::JobSpec& spec,
                                 int64_t* dataset_events) {
  RETURN_IF_ERROR(ValidateJobSpec(spec));
  ASSIGN_OR_RETURN(DatasetRefKind kind,
                   ValidateDatasetRef(spec.dataset(), spec.model_preset(), "spec.dataset"));
  if (kind == DatasetRefKind::kFile) RETURN_IF_ERROR(CheckFileDataset(p, spec.dataset()));
  // The dataset's event count when the server knows it (toy and uploaded data), for the folds.
  int64_t events = -1;
  if (kind == DatasetRefKind::kUploaded) {
    absl::StatusOr<v1::Dataset> dataset = datasets_.Get(p.tenant, spec.dataset());
    RETURN_IF_ERROR(WithField(dataset.status(), "spec.dataset"));
    events = dataset->events();
  }
  if (kind == DatasetRefKind::kToyMc) {
    absl::StatusOr<showers::ToyMcConfig> toy = showers::ParseToyMcSpec(spec.dataset());
    if (toy.ok()) events = toy->events;
  }
  if (spec.has_data_split() && events >= 0 && spec.data_split().folds() > events) {
    return checks::Invalid(
        "spec.data_split.folds",
        absl::StrCat("is ", spec.data_split().folds(), " but ", spec.dataset(), " has only ",
                     events, " events; every fold needs at least one, so use at most ", events,
                     " folds"));
  }
  if (!spec.initial_model().empty()) {
    absl::StatusOr<v1::ModelVersion> model = models_.Resolve(p.tenant, spec.initial_model());
    RETURN_IF_ERROR(WithField(model.status(), "spec.initial_model"));
    if (model->status() == v1::MODEL_STATUS_ARCHIVED) {
      return absl::FailedPreconditionError(
          absl::StrCat("spec.initial_model: ", spec.initial_model(),
                       " is archived; fine-tune from a ready "
                       "version"));
    }
  }
  if (spec.pool().size() > 63) return checks::Invalid("spec.pool", "is not a pool name");
  RETURN_IF_ERROR(ResolveJobPool(pools_, spec).status());
  if (dataset_events != nullptr) *dataset_events = events;
  return absl::OkStatus();
}

absl::StatusOr<v1::Job> JobSubmitter::Submit(const Principal& p, v1::JobSpec spec,
                                             const std::string& request_id) {
  if (p.worker) return absl::PermissionDeniedError("workers cannot submit jobs");
  if (request_id.size() > 128) {
    return checks::Invalid("request_id", "is longer than 128 characters");
  }
  RETURN_IF_ERROR(Check(p, spec));
  if (spec.hyper_parameters().seed() == 0) {
    // "0 = chosen by the server and recorded".
    std::random_device rd;
    const uint64_t seed = (uint64_t{rd()} << 32 | rd()) | 1;
    spec.mutable_hyper_parameters()->set_seed(seed);
  }
  ASSIGN_OR_RETURN(storage::TenantLimits limits, quotas_.LimitsOf(p.tenant));
  return jobs_.Create(p.tenant, spec, request_id, limits.max_concurrent_jobs);
}

}  // namespace gantry::server
