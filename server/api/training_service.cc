#include "server/api/training_service.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "server/platform/budget_gate.h"
#include "server/platform/polled_stream.h"
#include "server/requests/cost_requests.h"
#include "server/requests/field_checks.h"
#include "server/requests/training_requests.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

// Admins see every tenant's jobs; everyone else only their own.
std::string Scope(const Principal& p) { return p.admin ? "" : p.tenant; }

// What a WatchJob stream holds and reads: the tenant's stream slot (taken at the first poll),
// the subscription to this server's changes of the job (taken before the first read, so a change
// committed after a read wakes the stream), and the last event sent.
class JobEventsWatch {
 public:
  using Batch = PolledStream<v1::JobEvent>::Batch;

  JobEventsWatch(storage::JobRepository& jobs, TenantQuotas& quotas, JobNotifier& job_notifier,
                 Principal principal, std::string job_id, int64_t after,
                 std::shared_ptr<StreamWaker> waker)
      : jobs_(jobs),
        quotas_(quotas),
        principal_(std::move(principal)),
        job_id_(std::move(job_id)),
        after_(after),
        changes_(job_notifier, job_id_, [waker] { waker->Wake(); }) {}

  absl::StatusOr<Batch> Poll() {
    if (!principal_.worker && !principal_.admin && !slot_.has_value()) {
      ASSIGN_OR_RETURN(TenantQuotas::Slot slot, quotas_.AcquireStream(principal_.tenant));
      slot_.emplace(std::move(slot));
    }
    // The state is read before the events: a terminal transition and its event commit together,
    // so once a terminal state is seen the following read includes its event.
    ASSIGN_OR_RETURN(v1::Job job, jobs_.Get(Scope(principal_), job_id_));
    constexpr int kBatch = 500;
    Batch batch;
    ASSIGN_OR_RETURN(batch.messages, jobs_.ListEvents(job.id(), after_, kBatch));
    if (!batch.messages.empty()) after_ = batch.messages.back().sequence();
    batch.more = static_cast<int>(batch.messages.size()) == kBatch;
    batch.last = !batch.more && storage::IsTerminalJobState(job.state());
    return batch;
  }

 private:
  storage::JobRepository& jobs_;
  TenantQuotas& quotas_;
  const Principal principal_;
  const std::string job_id_;
  int64_t after_;
  std::optional<TenantQuotas::Slot> slot_;
  JobNotifier::Subscription changes_;
};

}  // namespace

grpc::Status TrainingService::SubmitJob(grpc::ServerContext* context,
                                        const v1::SubmitJobRequest* request, v1::Job* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    if (p.worker) return absl::PermissionDeniedError("workers cannot submit jobs");
    if (!request->has_spec()) return checks::Invalid("spec", "is missing");
    if (request->validate_only()) {
      if (request->request_id().size() > 128) {
        return checks::Invalid("request_id", "is longer than 128 characters");
      }
      int64_t events = -1;
      RETURN_IF_ERROR(submitter_.Check(p, request->spec(), &events));
      ASSIGN_OR_RETURN(std::vector<v1::CostEstimate> estimates,
                       estimator_.Estimate(request->spec(), events));
      response->set_owner(p.tenant);
      *response->mutable_spec() = request->spec();
      for (v1::CostEstimate& e : estimates) *response->add_estimates() = std::move(e);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(std::optional<double> budget, costs_.MonthlyBudget(p.tenant));
    if (budget.value_or(0) > 0) {
      int64_t events = -1;
      RETURN_IF_ERROR(submitter_.Check(p, request->spec(), &events));
      ASSIGN_OR_RETURN(std::vector<v1::CostEstimate> estimates,
                       estimator_.Estimate(request->spec(), events));
      RETURN_IF_ERROR(CheckBudget(p.tenant, estimates));
    }
    ASSIGN_OR_RETURN(*response, submitter_.Submit(p, request->spec(), request->request_id()));
    return absl::OkStatus();
  });
}

grpc::Status TrainingService::GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                                     v1::Job* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateId(request->job_id(), "job-", "job_id"));
    ASSIGN_OR_RETURN(*response, jobs_.Get(Scope(p), request->job_id()));
    RETURN_IF_ERROR(
        jobs_.AppendValidationCurve(response->id(), response->mutable_validation_curve()));
    RETURN_IF_ERROR(costs_.FillUsage({response}));
    return absl::OkStatus();
  });
}

grpc::Status TrainingService::GetValidationPoint(grpc::ServerContext* context,
                                                 const v1::GetValidationPointRequest* request,
                                                 v1::ValidationPoint* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateId(request->job_id(), "job-", "job_id"));
    if (request->step() < 0) return checks::Invalid("step", "must be >= 0");
    ASSIGN_OR_RETURN(v1::Job job, jobs_.Get(Scope(p), request->job_id()));
    ASSIGN_OR_RETURN(*response, jobs_.GetValidationPoint(job.id(), request->step()));
    return absl::OkStatus();
  });
}

grpc::Status TrainingService::ListJobs(grpc::ServerContext* context,
                                       const v1::ListJobsRequest* request,
                                       v1::ListJobsResponse* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateListJobs(*request));
    ASSIGN_OR_RETURN(int page_size, ValidatePage(request->page(), "page"));
    const std::string owner = p.admin ? request->owner() : p.tenant;
    std::vector<v1::JobState> states;
    for (int s : request->states()) states.push_back(static_cast<v1::JobState>(s));
    std::map<std::string, std::string> labels(request->label_selector().begin(),
                                              request->label_selector().end());
    ASSIGN_OR_RETURN(auto page,
                     jobs_.List(owner, states, labels, page_size, request->page().page_token()));
    for (v1::Job& job : page.items) *response->add_jobs() = std::move(job);
    std::vector<v1::Job*> jobs;
    for (v1::Job& job : *response->mutable_jobs()) jobs.push_back(&job);
    RETURN_IF_ERROR(costs_.FillUsage(jobs));
    response->set_next_page_token(page.next_page_token);
    return absl::OkStatus();
  });
}

grpc::Status TrainingService::CancelJob(grpc::ServerContext* context,
                                        const v1::CancelJobRequest* request, v1::Job* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateId(request->job_id(), "job-", "job_id"));
    if (request->reason().size() > 1024) {
      return checks::Invalid("reason", "is longer than 1024 characters");
    }
    ASSIGN_OR_RETURN(v1::Job job, jobs_.Get(Scope(p), request->job_id()));
    if (storage::IsTerminalJobState(job.state())) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job.id(), " is already ", v1::JobState_Name(job.state()),
                       "; only QUEUED, PLACING, RUNNING or RESTARTING jobs can be cancelled"));
    }
    if (job.state() == v1::JOB_STATE_CANCELLING) {
      *response = std::move(job);
      return absl::OkStatus();
    }
    const std::string message =
        absl::StrCat("cancelled by ", p.tenant,
                     request->reason().empty() ? "" : absl::StrCat(": ", request->reason()));
    // A queued job has nothing running: it ends at once. Running ranks must stop first (the job
    // coordinator completes CANCELLING -> CANCELLED).
    if (job.state() == v1::JOB_STATE_QUEUED) {
      ASSIGN_OR_RETURN(*response,
                       jobs_.Transition(job.id(), {v1::JOB_STATE_QUEUED}, v1::JOB_STATE_CANCELLED,
                                        "CancelledByUser", message));
    } else {
      ASSIGN_OR_RETURN(
          *response,
          jobs_.Transition(job.id(),
                           {v1::JOB_STATE_PLACING, v1::JOB_STATE_RUNNING, v1::JOB_STATE_RESTARTING},
                           v1::JOB_STATE_CANCELLING, "CancelRequested", message));
    }
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<v1::JobEvent>* TrainingService::WatchJob(
    grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) {
  absl::StatusOr<Principal> principal = auth_.PrincipalOf(context);
  if (!principal.ok()) return new RefusedStream<v1::JobEvent>(principal.status());
  absl::Status valid = ValidateId(request->job_id(), "job-", "job_id");
  if (valid.ok() && request->after_sequence() < 0) {
    valid = checks::Invalid("after_sequence", "must be >= 0 (0 = from the beginning)");
  }
  if (!valid.ok()) return new RefusedStream<v1::JobEvent>(valid);
  auto* stream = new PolledStream<v1::JobEvent>(pump_, auth_.WatchSettings(context));
  auto watch =
      std::make_shared<JobEventsWatch>(jobs_, quotas_, job_notifier_, *principal, request->job_id(),
                                       request->after_sequence(), stream->waker());
  stream->Begin([watch] { return watch->Poll(); });
  return stream;
}

grpc::Status TrainingService::GetJobLogs(grpc::ServerContext* context,
                                         const v1::GetJobLogsRequest* request,
                                         v1::GetJobLogsResponse* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateGetJobLogs(*request));
    ASSIGN_OR_RETURN(v1::Job job, jobs_.Get(Scope(p), request->job_id()));
    std::vector<v1::LogLine> lines;
    int64_t after = 0;
    constexpr int kBatch = 1000;
    while (true) {
      ASSIGN_OR_RETURN(std::vector<v1::JobEvent> events, jobs_.ListEvents(job.id(), after, kBatch));
      for (const v1::JobEvent& event : events) {
        after = event.sequence();
        if (!event.has_log()) continue;
        if (request->rank() >= 0 && event.log().rank() != request->rank()) continue;
        lines.push_back(event.log());
      }
      if (static_cast<int>(events.size()) < kBatch) break;
    }
    const size_t limit = request->tail() > 0 ? request->tail() : kMaxLogTail;
    const size_t first = lines.size() > limit ? lines.size() - limit : 0;
    for (size_t i = first; i < lines.size(); ++i) *response->add_lines() = std::move(lines[i]);
    return absl::OkStatus();
  });
}

absl::Status TrainingService::CheckBudget(const std::string& tenant,
                                          const std::vector<v1::CostEstimate>& estimates) {
  if (estimates.empty() || estimates[0].cost_usd() <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::optional<double> budget, costs_.MonthlyBudget(tenant));
  if (budget.value_or(0) <= 0) return absl::OkStatus();
  const absl::Time now = absl::Now();
  storage::CostReportQuery query;
  query.tenant = tenant;
  query.start = BudgetGate::MonthStart(now);
  query.end = now + absl::Hours(1);
  ASSIGN_OR_RETURN(v1::CostReport spent, costs_.Report(query));
  const double left = *budget - spent.cost_usd();
  const v1::CostEstimate& cheapest = estimates[0];
  if (cheapest.cost_usd() <= left) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "the job's estimate is %.2f USD on its cheapest pool%s but tenant %s has %.2f of its %.2f "
      "USD budget for %s left (%.2f spent); make the job smaller (epochs, dataset, world_size), "
      "or raise the budget with `gantry admin tenants limits set %s --monthly-budget-usd=N`",
      cheapest.cost_usd(), cheapest.pool().empty() ? "" : absl::StrCat(" ", cheapest.pool()),
      tenant, std::max(0.0, left), *budget, BudgetGate::MonthName(now), spent.cost_usd(), tenant));
}

grpc::Status TrainingService::GetCostReport(grpc::ServerContext* context,
                                            const v1::GetCostReportRequest* request,
                                            v1::CostReport* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    if (p.worker) return absl::PermissionDeniedError("workers cannot read cost reports");
    storage::CostReportQuery query;
    query.tenant = request->tenant().empty() ? p.tenant : request->tenant();
    if (query.tenant == "*") {
      if (!p.admin) {
        return absl::PermissionDeniedError(
            "tenant: \"*\" (every tenant) is for admins; leave it empty for your own costs");
      }
      query.tenant.clear();
    } else if (query.tenant != p.tenant && !p.admin) {
      return absl::PermissionDeniedError(absl::StrCat(
          "tenant: only admins may read another tenant's costs; leave it empty for your own"));
    }
    ASSIGN_OR_RETURN(CostReportShape shape, ValidateCostReport(*request, absl::Now()));
    query.by_tenant = shape.by_tenant;
    query.by_pool = shape.by_pool;
    query.by_model = shape.by_model;
    query.by_day = shape.by_day;
    query.start = shape.start;
    query.end = shape.end;
    if (!request->pool().empty()) {
      absl::StatusOr<v1::Pool> pool = pools_.Get(request->pool());
      if (absl::IsNotFound(pool.status())) {
        return checks::Invalid("pool", absl::StrCat("no pool is named \"", request->pool(),
                                                    "\" (gantry admin pools list); leave it "
                                                    "empty for every pool"));
      }
      RETURN_IF_ERROR(pool.status());
      query.pool = request->pool();
    }
    ASSIGN_OR_RETURN(*response, costs_.Report(query));
    return absl::OkStatus();
  });
}

}  // namespace gantry::server
