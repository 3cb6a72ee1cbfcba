// CoordinatorDeps: what the job coordinator's parts use from the rest of the server (storage,
// quotas, credentials, options), handed down by JobCoordinator.
#ifndef GANTRY_SERVER_COORDINATOR_COORDINATOR_DEPS_H_
#define GANTRY_SERVER_COORDINATOR_COORDINATOR_DEPS_H_

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/platform/server_options.h"
#include "server/platform/tenant_quotas.h"
#include "server/platform/worker_credentials.h"
#include "storage/blob_store.h"
#include "storage/cost_repository.h"
#include "storage/dataset_repository.h"
#include "storage/job_repository.h"
#include "storage/model_repository.h"
#include "storage/pool_repository.h"
#include "storage/study_repository.h"
#include "storage/tenant_limits_repository.h"
#include "storage/worker_identity_repository.h"
#include "storage/worker_repository.h"

namespace gantry::server {

// What the coordinator's parts use, which JobCoordinator hands down to them. Every reference must
// outlive the coordinator (the struct itself need not: nothing keeps it).
struct CoordinatorDeps {
  storage::JobRepository& jobs;
  storage::DatasetRepository& datasets;
  storage::ModelRepository& models;
  storage::StudyRepository& studies;  // a registered model's study lineage
  storage::PoolRepository& pools;
  storage::WorkerRepository& workers;
  storage::WorkerIdentityRepository& identities;
  storage::TenantLimitsRepository& tenant_limits;
  storage::CostRepository& costs;
  storage::BlobStore& blobs;  // the size of an uploaded checkpoint
  TenantQuotas& quotas;
  WorkerCredentials& credentials;
  const CoordinatorOptions& options;
  const FileDatasetOptions& file_datasets;
  // The coordinator's time: absl::Now, or a test's clock (with Tick called by the test).
  std::function<absl::Time()> clock = &absl::Now;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_COORDINATOR_DEPS_H_
