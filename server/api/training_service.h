// TrainingService: submit, list, get, cancel and watch training jobs (gantry.v1.TrainingService), a
// thin layer over JobRepository. Jobs stay QUEUED until the job coordinator places them.
#ifndef GANTRY_SERVER_API_TRAINING_SERVICE_H_
#define GANTRY_SERVER_API_TRAINING_SERVICE_H_

#include "gantry/v1/training.grpc.pb.h"
#include "server/coordinator/job_submitter.h"
#include "server/platform/backend.h"
#include "server/pools/cost_estimator.h"

namespace gantry::server {

// Thread-safe; `backend` must outlive it.
class TrainingService final : public gantry::v1::TrainingService::Service {
 public:
  explicit TrainingService(Backend& backend)
      : backend_(backend), submitter_(backend), estimator_(*backend.pools, *backend.costs) {}

  grpc::Status SubmitJob(grpc::ServerContext* context, const gantry::v1::SubmitJobRequest* request,
                         gantry::v1::Job* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const gantry::v1::GetJobRequest* request,
                      gantry::v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const gantry::v1::ListJobsRequest* request,
                        gantry::v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const gantry::v1::CancelJobRequest* request,
                         gantry::v1::Job* response) override;
  // Polls the event log every options.watch_poll_interval until the job is terminal.
  grpc::Status WatchJob(grpc::ServerContext* context, const gantry::v1::WatchJobRequest* request,
                        grpc::ServerWriter<gantry::v1::JobEvent>* writer) override;
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

  Backend& backend_;
  JobSubmitter submitter_;
  CostEstimator estimator_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_API_TRAINING_SERVICE_H_
