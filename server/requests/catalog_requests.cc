#include "server/requests/catalog_requests.h"

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/safe_text.h"
#include "base/status_macros.h"
#include "jobspec/export_profile.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

using checks::AllChars;
using checks::CheckFinite;
using checks::CheckParticle;
using checks::Invalid;
using checks::Sub;

// ListModelsRequest.dataset: a "ds-" id, a "toymc:" or "file://" reference, or a dataset name.
absl::Status ValidateDatasetFilter(const std::string& dataset) {
  if (dataset.empty()) return absl::OkStatus();
  if (absl::StartsWith(dataset, "ds-")) return ValidateId(dataset, "ds-", "dataset");
  if (absl::StartsWith(dataset, "toymc:") || absl::StartsWith(dataset, "file://")) {
    if (dataset.size() > 1024) return Invalid("dataset", "is longer than 1024 characters");
    return absl::OkStatus();
  }
  if (dataset.size() > 128 || !AllChars(dataset, "._-")) {
    return Invalid("dataset",
                   "must be a dataset id (ds-...), a dataset name ([A-Za-z0-9._-]{1,128}) or a "
                   "\"toymc:...\" or \"file://...\" reference as given to the job");
  }
  return absl::OkStatus();
}

}  // namespace

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
  RETURN_IF_ERROR(ValidateDatasetFilter(request.dataset()));
  if (!request.model_preset().empty() &&
      (request.model_preset().size() > 64 || !AllChars(request.model_preset(), "._-"))) {
    return Invalid("model_preset", "must name a preset such as \"3dgan-25\" ([A-Za-z0-9._-])");
  }
  RETURN_IF_ERROR(CheckParticle(request.particle(), "particle"));
  if (request.name_contains().size() > 64) {
    return Invalid("name_contains", "is longer than 64 characters");
  }
  if (!request.owner().empty()) RETURN_IF_ERROR(ValidateTenantName(request.owner(), "owner"));
  if (!request.alias().empty()) RETURN_IF_ERROR(ValidateAlias(request.alias(), "alias"));
  if (!request.fine_tuned_from().empty()) {
    ASSIGN_OR_RETURN(ModelRef parent, ParseModelRef(request.fine_tuned_from(), "fine_tuned_from"));
    if (!parent.alias.empty()) {
      return Invalid("fine_tuned_from",
                     "must name a version (name:version or owner/name:version), not an alias");
    }
  }
  const std::string& order = request.order_by();
  if (!order.empty() && order != "created_at") {
    const absl::string_view metric =
        absl::StartsWith(order, "metric:") ? absl::string_view(order).substr(7) : "";
    if (metric.empty() || !AllChars(metric, "_.-")) {
      return Invalid("order_by", absl::StrCat("\"", BoundedField(order),
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

absl::Status ValidateUpdateModel(const v1::UpdateModelRequest& request) {
  RETURN_IF_ERROR(ParseModelRef(request.model(), "model").status());
  const auto& paths = request.update_mask().paths();
  if (paths.empty()) {
    return Invalid("update_mask",
                   "is empty; name the fields to change: description, visibility, tags");
  }
  std::set<std::string> seen;
  for (int i = 0; i < paths.size(); ++i) {
    const std::string field = absl::StrCat("update_mask.paths[", i, "]");
    const std::string& path = paths[i];
    if (path != "description" && path != "visibility" && path != "tags") {
      return Invalid(field, absl::StrCat("\"", BoundedField(path),
                                         "\" cannot be updated; use description, visibility or "
                                         "tags"));
    }
    if (!seen.insert(path).second) {
      return Invalid(
          field, absl::StrCat("\"", BoundedField(path), "\" is given twice; name each field once"));
    }
  }
  const v1::ModelVersion& patch = request.model_version();
  if (seen.count("description")) {
    RETURN_IF_ERROR(ValidateDescription(patch.description(), "model_version.description"));
  }
  if (seen.count("visibility") && patch.visibility() != v1::VISIBILITY_PRIVATE &&
      patch.visibility() != v1::VISIBILITY_PUBLIC) {
    return Invalid("model_version.visibility",
                   absl::StrCat("is ", static_cast<int>(patch.visibility()),
                                "; set VISIBILITY_PRIVATE or VISIBILITY_PUBLIC"));
  }
  if (seen.count("tags")) RETURN_IF_ERROR(ValidateLabels(patch.tags(), "model_version.tags"));
  return absl::OkStatus();
}

absl::Status ValidateExportModel(const v1::ExportModelRequest& request) {
  RETURN_IF_ERROR(ParseModelRef(request.model(), "model").status());
  if (request.format() != v1::EXPORT_FORMAT_ONNX && request.format() != v1::EXPORT_FORMAT_PYTORCH &&
      request.format() != v1::EXPORT_FORMAT_TORCHSCRIPT) {
    const std::string given = v1::ExportFormat_IsValid(request.format())
                                  ? v1::ExportFormat_Name(request.format())
                                  : absl::StrCat(request.format());
    return absl::InvalidArgumentError(
        absl::StrCat("format: ", given,
                     " is not an export format; use EXPORT_FORMAT_ONNX, EXPORT_FORMAT_PYTORCH or "
                     "EXPORT_FORMAT_TORCHSCRIPT"));
  }
  return jobspec::CheckProfileFormat(request.profile(), request.format());
}

absl::Status ValidateExportForModel(const v1::ExportModelRequest& request,
                                    const v1::ModelVersion& model) {
  const bool variable_angle =
      model.has_generator()
          ? model.generator().variable_angle()
          : model.has_theta_range_rad() && model.theta_range_rad().max() > 0;
  absl::Status s = jobspec::CheckProfileFitsModel(request.profile(), variable_angle);
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat(model.name(), ":", model.version(), ": ", s.message()));
}

}  // namespace gantry::server
