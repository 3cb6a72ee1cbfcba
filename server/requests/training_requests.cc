#include "server/requests/training_requests.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "jobspec/job_plan.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

using checks::CheckInt;
using checks::Invalid;

}  // namespace

// The spec's own meaning (preset, model, hyper-parameters, validation, checkpoints, split,
// pipeline) is jobspec::PlanJob's, the function each rank plans itself with; here only what the
// server decides besides: names, labels, the dataset reference's syntax, world size, resources,
// scheduling and the registry fields.
absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  if (spec.display_name().size() > 256) {
    return Invalid("spec.display_name", "is longer than 256 characters");
  }
  RETURN_IF_ERROR(ValidateLabels(spec.labels(), "spec.labels"));
  RETURN_IF_ERROR(jobspec::PlanJob(spec).status());
  RETURN_IF_ERROR(ValidateDatasetRef(spec.dataset(), spec.model_preset(), "spec.dataset").status());
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
  RETURN_IF_ERROR(CheckInt(spec.max_restarts(), 0, 100, "spec.max_restarts"));
  if (!spec.initial_model().empty()) {
    RETURN_IF_ERROR(ParseModelRef(spec.initial_model(), "spec.initial_model").status());
  }
  if (!spec.model_name().empty()) {
    RETURN_IF_ERROR(ValidateModelName(spec.model_name(), "spec.model_name"));
  }
  if (!v1::Visibility_IsValid(spec.model_visibility())) {
    return Invalid("spec.model_visibility", "is not a known Visibility; use PRIVATE or PUBLIC");
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
