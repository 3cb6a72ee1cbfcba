// JobSubmitter: the one path a training job enters the system by (TrainingService.SubmitJob and
// the study driver's trial jobs): spec checks, dataset and initial-model access, the seed, the
// tenant's active-job quota and the idempotent insert.
#ifndef GANTRY_SERVER_COORDINATOR_JOB_SUBMITTER_H_
#define GANTRY_SERVER_COORDINATOR_JOB_SUBMITTER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/training.pb.h"
#include "server/platform/auth.h"
#include "server/platform/server_options.h"
#include "server/platform/tenant_quotas.h"
#include "storage/dataset_repository.h"
#include "storage/job_repository.h"
#include "storage/model_repository.h"
#include "storage/pool_repository.h"

namespace gantry::server {

// Thread-safe (database I/O only). Every reference must outlive it.
class JobSubmitter {
 public:
  JobSubmitter(storage::JobRepository& jobs, storage::DatasetRepository& datasets,
               storage::ModelRepository& models, storage::PoolRepository& pools,
               TenantQuotas& quotas, const FileDatasetOptions& file_datasets)
      : jobs_(jobs),
        datasets_(datasets),
        models_(models),
        pools_(pools),
        quotas_(quotas),
        file_datasets_(file_datasets) {}

  // Validates `spec` for tenant `p` and stores it as a QUEUED job. A seed of 0 is replaced by a
  // random one. INVALID_ARGUMENT / PERMISSION_DENIED / NOT_FOUND name the spec field to change;
  // RESOURCE_EXHAUSTED when the tenant's active-job limit is reached. With a request_id, a repeat
  // returns the job the first call created.
  absl::StatusOr<gantry::v1::Job> Submit(const Principal& p, gantry::v1::JobSpec spec,
                                         const std::string& request_id);

  // The checks of Submit that need no insert: the spec, its dataset and its initial model. With
  // `dataset_events`, also the dataset's event count (-1 when the server does not know it).
  absl::Status Check(const Principal& p, const gantry::v1::JobSpec& spec,
                     int64_t* dataset_events = nullptr);

 private:
  // file:// datasets: PERMISSION_DENIED unless the operator allows the tenant, INVALID_ARGUMENT
  // unless the path lies under an allowed root.
  absl::Status CheckFileDataset(const Principal& p, const std::string& ref) const;

  storage::JobRepository& jobs_;
  storage::DatasetRepository& datasets_;  // uploaded datasets: access and event counts
  storage::ModelRepository& models_;      // initial models
  storage::PoolRepository& pools_;
  TenantQuotas& quotas_;  // the active-job limit
  const FileDatasetOptions file_datasets_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_JOB_SUBMITTER_H_
