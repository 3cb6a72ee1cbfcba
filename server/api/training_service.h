// TrainingService: submit, list, get, cancel and watch training jobs (gantry.v1.TrainingService), a
// thin layer over JobRepository. Jobs stay QUEUED until the job coordinator places them.
#ifndef GANTRY_SERVER_API_TRAINING_SERVICE_H_
#define GANTRY_SERVER_API_TRAINING_SERVICE_H_

#include "gantry/v1/training.grpc.pb.h"
#include "server/coordinator/job_submitter.h"
#include "server/platform/call_auth.h"
#include "server/platform/job_notifier.h"
#include "server/platform/stream_pump.h"
#include "server/platform/tenant_quotas.h"
#include "server/pools/cost_estimator.h"
#include "storage/cost_repository.h"
#include "storage/job_repository.h"
#include "storage/pool_repository.h"

namespace gantry::server {

// Thread-safe; every reference must outlive it. Jobs enter through `submitter` (shared with the
// StudyService); `pools` and `costs` give the cost estimates and reports, `quotas` the tenant's
// watch streams, `job_notifier` wakes a job's watches.
// WatchJob is served on gRPC's callback API (through `pump`, which must outlive the calls); the
// other methods are synchronous.
class TrainingService final
    : public gantry::v1::TrainingService::WithCallbackMethod_WatchJob<
          gantry::v1::TrainingService::Service> {
 public:
  TrainingService(CallAuth& auth, JobSubmitter& submitter, storage::JobRepository& jobs,
                  storage::CostRepository& costs, storage::PoolRepository& pools,
                  TenantQuotas& quotas, JobNotifier& job_notifier, StreamPump& pump)
      : auth_(auth),
        submitter_(submitter),
        jobs_(jobs),
        costs_(costs),
        pools_(pools),
        quotas_(quotas),
        job_notifier_(job_notifier),
        pump_(pump),
        estimator_(pools, costs) {}

  grpc::Status SubmitJob(grpc::ServerContext* context, const gantry::v1::SubmitJobRequest* request,
                         gantry::v1::Job* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const gantry::v1::GetJobRequest* request,
                      gantry::v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const gantry::v1::ListJobsRequest* request,
                        gantry::v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const gantry::v1::CancelJobRequest* request,
                         gantry::v1::Job* response) override;
  // Sends the job's events from after_sequence on until the job is terminal: read again when
  // this server writes a change of the job, and otherwise every watch_poll_interval. Between
  // reads the call holds no thread (a PolledStream on the pump).
  grpc::ServerWriteReactor<gantry::v1::JobEvent>* WatchJob(
      grpc::CallbackServerContext* context, const gantry::v1::WatchJobRequest* request) override;
  grpc::Status GetJobLogs(grpc::ServerContext* context,
                          const gantry::v1::GetJobLogsRequest* request,
                          gantry::v1::GetJobLogsResponse* response) override;
  grpc::Status GetValidationPoint(grpc::ServerContext* context,
                                  const gantry::v1::GetValidationPointRequest* request,
                                  gantry::v1::ValidationPoint* response) override;
  grpc::Status GetCostReport(grpc::ServerContext* context,
                             const gantry::v1::GetCostReportRequest* request,
                             gantry::v1::CostReport* response) override;

 private:
  // FAILED_PRECONDITION when the tenant has a monthly budget and the cheapest estimate of `spec`
  // exceeds what is left of it this month.
  absl::Status CheckBudget(const std::string& tenant,
                           const std::vector<gantry::v1::CostEstimate>& estimates);

  CallAuth& auth_;
  JobSubmitter& submitter_;
  storage::JobRepository& jobs_;
  storage::CostRepository& costs_;
  storage::PoolRepository& pools_;
  TenantQuotas& quotas_;
  JobNotifier& job_notifier_;
  StreamPump& pump_;
  CostEstimator estimator_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_API_TRAINING_SERVICE_H_
