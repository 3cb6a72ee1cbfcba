#include "server/api/study_service.h"

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "server/coordinator/study_driver.h"
#include "server/coordinator/study_summary.h"
#include "server/requests/field_checks.h"
#include "server/requests/study_requests.h"
#include "studies/optimizer.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

// Admins see every tenant's studies; everyone else only their own.
std::string Scope(const Principal& p) { return p.admin ? "" : p.tenant; }

// The search library's own checks of the space and budget, under the request's field names.
absl::Status CheckSearch(const v1::StudySpec& spec) {
  const studies::SearchSpace space = SearchSpaceOf(spec);
  if (absl::Status s = space.Validate(); !s.ok()) {
    return checks::Invalid("spec.parameters", s.message());
  }
  studies::Algorithm algorithm = studies::Algorithm::kRandom;
  if (spec.algorithm() == v1::SEARCH_ALGORITHM_GRID) algorithm = studies::Algorithm::kGrid;
  if (spec.algorithm() == v1::SEARCH_ALGORITHM_BAYESIAN) {
    algorithm = studies::Algorithm::kBayesian;
  }
  if (spec.algorithm() == v1::SEARCH_ALGORITHM_EVOLUTIONARY) {
    algorithm = studies::Algorithm::kEvolutionary;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<studies::Optimizer> optimizer,
                   studies::MakeOptimizer(algorithm));
  if (absl::Status s = optimizer->CheckBudget(space, spec.budget().max_trials()); !s.ok()) {
    return checks::Invalid("spec.budget.max_trials", s.message());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::Study> StudyService::Load(const std::string& scope, const std::string& id,
                                             std::vector<v1::Trial>* trials) {
  RETURN_IF_ERROR(ValidateId(id, "study-", "study_id"));
  ASSIGN_OR_RETURN(v1::Study study, studies_.Get(scope, id));
  ASSIGN_OR_RETURN(*trials, studies_.ListTrials(id));
  SummarizeStudy(*trials, &study);
  return study;
}

grpc::Status StudyService::CreateStudy(grpc::ServerContext* context,
                                       const v1::CreateStudyRequest* request, v1::Study* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    if (p.worker) return absl::PermissionDeniedError("workers cannot create studies");
    if (!request->has_spec()) return checks::Invalid("spec", "is missing");
    if (request->request_id().size() > 128) {
      return checks::Invalid("request_id", "is longer than 128 characters");
    }
    v1::StudySpec spec = request->spec();
    RETURN_IF_ERROR(ValidateStudySpec(spec));
    if (spec.base_job().labels_size() > kMaxLabels - 3) {
      return checks::Invalid("spec.base_job.labels",
                             absl::StrCat("has ", spec.base_job().labels_size(),
                                          " entries; a study adds 3 (study, study-trial, "
                                          "study-fold), so give at most ",
                                          kMaxLabels - 3));
    }
    RETURN_IF_ERROR(CheckSearch(spec));
    RETURN_IF_ERROR(quotas_.CheckStudyJobs(p.tenant, spec.budget().max_trials(), spec.folds()));
    // The base job as its first fold would run: the dataset, access and K against its events.
    v1::JobSpec first = spec.base_job();
    if (spec.folds() > 1) {
      first.mutable_data_split()->set_folds(spec.folds());
      first.mutable_data_split()->set_validation_fold(0);
    }
    RETURN_IF_ERROR(UnderBaseJob(submitter_.Check(p, first)));
    if (spec.seed() == 0) {
      std::random_device rd;
      spec.set_seed((uint64_t{rd()} << 32 | rd()) | 1);
    }
    if (spec.objective().metric().empty()) spec.mutable_objective()->set_metric("fom");
    ASSIGN_OR_RETURN(*response, studies_.Create(p.tenant, spec, request->request_id()));
    std::vector<v1::Trial> trials;
    ASSIGN_OR_RETURN(*response, Load(p.tenant, response->id(), &trials));
    return absl::OkStatus();
  });
}

grpc::Status StudyService::GetStudy(grpc::ServerContext* context,
                                    const v1::GetStudyRequest* request, v1::Study* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    if (p.worker) return absl::PermissionDeniedError("workers cannot read studies");
    std::vector<v1::Trial> trials;
    ASSIGN_OR_RETURN(*response, Load(Scope(p), request->study_id(), &trials));
    return absl::OkStatus();
  });
}

grpc::Status StudyService::ListStudies(grpc::ServerContext* context,
                                       const v1::ListStudiesRequest* request,
                                       v1::ListStudiesResponse* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    if (p.worker) return absl::PermissionDeniedError("workers cannot read studies");
    RETURN_IF_ERROR(ValidateListStudies(*request));
    ASSIGN_OR_RETURN(int page_size, ValidatePage(request->page(), "page"));
    std::vector<v1::StudyState> states;
    for (int s : request->states()) states.push_back(static_cast<v1::StudyState>(s));
    ASSIGN_OR_RETURN(auto page,
                     studies_.List(Scope(p), states, page_size, request->page().page_token()));
    for (v1::Study& study : page.items) {
      ASSIGN_OR_RETURN(std::vector<v1::Trial> trials, studies_.ListTrials(study.id()));
      SummarizeStudy(trials, &study);
      *response->add_studies() = std::move(study);
    }
    response->set_next_page_token(page.next_page_token);
    return absl::OkStatus();
  });
}

grpc::Status StudyService::ListTrials(grpc::ServerContext* context,
                                      const v1::ListTrialsRequest* request,
                                      v1::ListTrialsResponse* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    if (p.worker) return absl::PermissionDeniedError("workers cannot read studies");
    std::vector<v1::Trial> trials;
    ASSIGN_OR_RETURN(v1::Study study, Load(Scope(p), request->study_id(), &trials));
    for (v1::Trial& t : trials) *response->add_trials() = std::move(t);
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<v1::StudyUpdate>* StudyService::WatchStudy(
    grpc::CallbackServerContext* context, const v1::WatchStudyRequest* request) {
  absl::StatusOr<Principal> p = auth_.PrincipalOf(context);
  if (!p.ok()) return new RefusedStream<v1::StudyUpdate>(p.status());
  if (p->worker) {
    return new RefusedStream<v1::StudyUpdate>(
        absl::PermissionDeniedError("workers cannot read studies"));
  }
  // What the stream holds between polls: the tenant's stream slot (taken once the study is
  // found) and the last update sent.
  struct Watch {
    std::string scope, tenant, id, last;
    bool needs_slot = false;
    std::optional<TenantQuotas::Slot> slot;
  };
  auto watch = std::make_shared<Watch>();
  watch->scope = Scope(*p);
  watch->tenant = p->tenant;
  watch->id = request->study_id();
  watch->needs_slot = !p->admin;
  auto* stream = new PolledStream<v1::StudyUpdate>(pump_, auth_.WatchSettings(context));
  stream->Begin([this, watch]() -> absl::StatusOr<PolledStream<v1::StudyUpdate>::Batch> {
    ASSIGN_OR_RETURN(auto batch, PollStudy(watch->scope, watch->id, &watch->last));
    if (watch->needs_slot && !watch->slot.has_value()) {
      ASSIGN_OR_RETURN(TenantQuotas::Slot slot, quotas_.AcquireStream(watch->tenant));
      watch->slot.emplace(std::move(slot));
    }
    return batch;
  });
  return stream;
}

absl::StatusOr<PolledStream<v1::StudyUpdate>::Batch> StudyService::PollStudy(
    const std::string& scope, const std::string& id, std::string* last) {
  std::vector<v1::Trial> trials;
  v1::StudyUpdate update;
  ASSIGN_OR_RETURN(*update.mutable_study(), Load(scope, id, &trials));
  for (v1::Trial& t : trials) *update.add_trials() = std::move(t);
  // Running jobs add device-hours every read; compare without them so only real changes
  // (states, results, trials) are sent.
  v1::StudyUpdate key = update;
  key.mutable_study()->clear_device_hours();
  key.mutable_study()->clear_updated_at();
  for (v1::Trial& t : *key.mutable_trials()) {
    t.clear_device_hours();
    for (v1::FoldResult& f : *t.mutable_folds()) f.clear_device_hours();
  }
  std::string serialized;
  key.SerializeToString(&serialized);
  PolledStream<v1::StudyUpdate>::Batch batch;
  batch.last = storage::IsTerminalStudyState(update.study().state());
  if (serialized != *last) {
    batch.messages.push_back(std::move(update));
    *last = std::move(serialized);
  }
  return batch;
}

grpc::Status StudyService::CancelStudy(grpc::ServerContext* context,
                                       const v1::CancelStudyRequest* request, v1::Study* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    if (p.worker) return absl::PermissionDeniedError("workers cannot cancel studies");
    RETURN_IF_ERROR(ValidateId(request->study_id(), "study-", "study_id"));
    if (request->reason().size() > 1024) {
      return checks::Invalid("reason", "is longer than 1024 characters");
    }
    ASSIGN_OR_RETURN(v1::Study study, studies_.Get(Scope(p), request->study_id()));
    if (storage::IsTerminalStudyState(study.state())) {
      return absl::FailedPreconditionError(absl::StrCat("study ", study.id(), " is already ",
                                                        v1::StudyState_Name(study.state()),
                                                        "; only a RUNNING study can be cancelled"));
    }
    const std::string message =
        absl::StrCat("cancelled by ", p.tenant,
                     request->reason().empty() ? "" : absl::StrCat(": ", request->reason()));
    if (study.state() == v1::STUDY_STATE_RUNNING) {
      RETURN_IF_ERROR(studies_
                          .Transition(study.id(), {v1::STUDY_STATE_RUNNING},
                                      v1::STUDY_STATE_CANCELLING, "CancelRequested", message)
                          .status());
    }
    // The trial jobs are cancelled now; the driver ends the trials and the study once they
    // stopped.
    ASSIGN_OR_RETURN(std::vector<v1::Trial> trials, studies_.ListTrials(study.id()));
    for (const v1::Trial& t : trials) {
      for (const v1::FoldResult& f : t.folds()) {
        if (storage::IsTerminalJobState(f.job_state())) continue;
        RETURN_IF_ERROR(StudyDriver::CancelTrialJob(
            jobs_, f.job_id(), absl::StrCat("study ", study.id(), " ", message)));
      }
    }
    ASSIGN_OR_RETURN(*response, Load(Scope(p), study.id(), &trials));
    return absl::OkStatus();
  });
}

}  // namespace gantry::server
