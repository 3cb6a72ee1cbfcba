#include "server/api/catalog_service.h"

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "jobspec/export_profile.h"
#include "jobspec/model_card.h"
#include "server/requests/catalog_requests.h"
#include "server/requests/field_checks.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

absl::Status ValidateNameAndAlias(const std::string& name, const std::string& alias) {
  if (name.empty()) return checks::Invalid("name", "is missing; give the model's name");
  RETURN_IF_ERROR(ValidateModelName(name, "name"));
  if (alias.empty()) return absl::InvalidArgumentError("alias: is missing, e.g. \"champion\"");
  return ValidateAlias(alias, "alias");
}

}  // namespace

grpc::Status CatalogService::ListModels(grpc::ServerContext* context,
                                        const v1::ListModelsRequest* request,
                                        v1::ListModelsResponse* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateListModels(*request));
    ASSIGN_OR_RETURN(int page_size, ValidatePage(request->page(), "page"));
    storage::ModelFilter filter;
    filter.name = request->name();
    filter.tags.insert(request->tags().begin(), request->tags().end());
    filter.metric_filters.assign(request->metric_filters().begin(),
                                 request->metric_filters().end());
    filter.order_by = request->order_by();
    filter.include_archived = request->include_archived();
    filter.dataset = request->dataset();
    filter.model_preset = request->model_preset();
    filter.particle = request->particle();
    filter.name_contains = request->name_contains();
    filter.owner = request->owner();
    filter.alias = request->alias();
    filter.fine_tuned_from = request->fine_tuned_from();
    ASSIGN_OR_RETURN(auto page,
                     models_.List(p.tenant, filter, page_size, request->page().page_token()));
    for (v1::ModelVersion& m : page.items) *response->add_models() = std::move(m);
    response->set_next_page_token(page.next_page_token);
    return absl::OkStatus();
  });
}

grpc::Status CatalogService::GetModel(grpc::ServerContext* context,
                                      const v1::GetModelRequest* request,
                                      v1::ModelVersion* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ParseModelRef(request->model(), "model").status());
    ASSIGN_OR_RETURN(*response, models_.Resolve(p.tenant, request->model()));
    // The curve of the job that trained it (none for a version registered without a job).
    if (!response->lineage().job_id().empty()) {
      RETURN_IF_ERROR(jobs_.AppendValidationCurve(response->lineage().job_id(),
                                                  response->mutable_validation_curve()));
    }
    FillReadiness(response);
    // The model card of the generator's interface, when the training rank recorded it.
    if (response->has_generator()) {
      absl::StatusOr<std::string> card = jobspec::RegistryModelCardJson(*response);
      if (card.ok()) response->set_model_card_json(*std::move(card));
    }
    return absl::OkStatus();
  });
}

void CatalogService::FillReadiness(v1::ModelVersion* model) const {
  if (sessions_ == nullptr || router_ == nullptr) return;
  v1::ModelReadiness* readiness = model->mutable_readiness();
  readiness->set_serving_workers(router_->ServingWorkers());
  std::map<std::string, std::string> names;
  for (const scheduler::GenerationRouter::WorkerView& w : router_->Snapshot())
    names[w.worker_id] = w.name;
  for (const auto& [worker_id, report] : sessions_->Reports()) {
    for (const v1::LoadedModel& m : report.heartbeat.loaded_models()) {
      if (m.checkpoint_sha256() != model->checkpoint_sha256()) continue;
      v1::ModelPlacement* p = readiness->add_loaded_on();
      p->set_worker_id(worker_id);
      if (auto it = names.find(worker_id); it != names.end()) p->set_worker_name(it->second);
      p->set_warm(m.warm());
      p->set_active_requests(m.active_requests());
      p->set_queued_showers(m.queued_showers());
      p->set_pinned(m.pinned());
      if (m.warm()) readiness->set_warm(true);
    }
  }
}

grpc::Status CatalogService::SetAlias(grpc::ServerContext* context,
                                      const v1::SetAliasRequest* request,
                                      v1::ModelVersion* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateNameAndAlias(request->name(), request->alias()));
    if (request->version() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("version: is ", request->version(),
                                                     "; give the version number (1, 2, ...)"));
    }
    ASSIGN_OR_RETURN(*response, models_.SetAlias(p.tenant, request->name(), request->alias(),
                                                 request->version()));
    resolver_.ForgetModels();  // Generate resolves through a cache
    return absl::OkStatus();
  });
}

grpc::Status CatalogService::DeleteAlias(grpc::ServerContext* context,
                                         const v1::DeleteAliasRequest* request,
                                         v1::DeleteAliasResponse* /*response*/) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateNameAndAlias(request->name(), request->alias()));
    absl::Status deleted = models_.DeleteAlias(p.tenant, request->name(), request->alias());
    resolver_.ForgetModels();  // Generate resolves through a cache
    return deleted;
  });
}

grpc::Status CatalogService::SetTags(grpc::ServerContext* context,
                                     const v1::SetTagsRequest* request,
                                     v1::ModelVersion* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateSetTags(*request));
    std::map<std::string, std::string> set(request->set().begin(), request->set().end());
    std::vector<std::string> remove(request->remove().begin(), request->remove().end());
    ASSIGN_OR_RETURN(*response, models_.SetTags(p.tenant, request->model(), set, remove));
    return absl::OkStatus();
  });
}

grpc::Status CatalogService::UpdateModel(grpc::ServerContext* context,
                                         const v1::UpdateModelRequest* request,
                                         v1::ModelVersion* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateUpdateModel(*request));
    const v1::ModelVersion& patch = request->model_version();
    storage::ModelUpdate update;
    for (const std::string& path : request->update_mask().paths()) {
      if (path == "description") update.description = patch.description();
      if (path == "visibility") update.visibility = patch.visibility();
      if (path == "tags") update.tags.emplace(patch.tags().begin(), patch.tags().end());
    }
    ASSIGN_OR_RETURN(*response, models_.Update(p.tenant, request->model(), update));
    resolver_.ForgetModels();  // Generate resolves through a cache; visibility decides who can
    return absl::OkStatus();
  });
}

grpc::Status CatalogService::ArchiveModel(grpc::ServerContext* context,
                                          const v1::ArchiveModelRequest* request,
                                          v1::ModelVersion* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ParseModelRef(request->model(), "model").status());
    ASSIGN_OR_RETURN(*response, models_.Archive(p.tenant, request->model()));
    resolver_.ForgetModels();  // Generate resolves through a cache
    return absl::OkStatus();
  });
}

grpc::Status CatalogService::ExportModel(grpc::ServerContext* context,
                                         const v1::ExportModelRequest* request,
                                         grpc::ServerWriter<v1::ExportModelChunk>* writer) {
  const absl::Time start = absl::Now();
  std::string model_ref = request->model(), worker = "-", tenant = "-";
  grpc::Status status = auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    tenant = p.tenant;
    RETURN_IF_ERROR(ValidateExportModel(*request));
    absl::StatusOr<v1::ModelVersion> model = resolver_.ResolveModel(p.tenant, request->model());
    if (!model.ok()) {
      return absl::Status(model.status().code(), absl::StrCat("model: ", model.status().message()));
    }
    model_ref = absl::StrCat(model->name(), ":", model->version());
    RETURN_IF_ERROR(ValidateExportForModel(*request, *model));
    ASSIGN_OR_RETURN(TenantQuotas::Slot stream, quotas_.AcquireStream(p.tenant));
    return exports_.Export(context, *model, request->format(), request->profile(), writer, &worker);
  });
  GANTRY_LOG(INFO) << "export " << model_ref << " tenant=" << tenant
                   << " format=" << v1::ExportFormat_Name(request->format())
                   << " profile=" << jobspec::ExportProfileName(request->profile())
                   << " worker=" << worker << " " << absl::ToDoubleSeconds(absl::Now() - start)
                   << " s: "
                   << (status.ok()
                           ? "OK"
                           : absl::StrCat(status.error_code(), " ", status.error_message()));
  return status;
}

}  // namespace gantry::server
