// ModelRegistrar: turns a successful JobResult into a model version in the catalog.
#ifndef GANTRY_SERVER_COORDINATOR_MODEL_REGISTRAR_H_
#define GANTRY_SERVER_COORDINATOR_MODEL_REGISTRAR_H_

#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/training.pb.h"
#include "gantry/v1/worker.pb.h"
#include "storage/blob_store.h"
#include "storage/job_repository.h"
#include "storage/model_repository.h"
#include "storage/study_repository.h"

namespace gantry::server {

// Thread-safe (database I/O only, no state). Every reference must outlive it.
class ModelRegistrar {
 public:
  ModelRegistrar(storage::JobRepository& jobs, storage::BlobStore& blobs,
                 storage::StudyRepository& studies, storage::ModelRepository& models)
      : jobs_(jobs), blobs_(blobs), studies_(studies), models_(models) {}

  // Checks the uploaded checkpoint (one this job uploaded, FAILED_PRECONDITION otherwise, with the
  // size the result states), registers the model version (with lineage, metrics and
  // histograms), records it as the job's model and appends a model_registered event. Returns the
  // model reference "name:version".
  absl::StatusOr<std::string> Register(const std::string& job_id, const std::string& owner,
                                       const gantry::v1::JobSpec& spec,
                                       const gantry::v1::JobResult& result);

 private:
  storage::JobRepository& jobs_;
  storage::BlobStore& blobs_;          // the checkpoint's stored size
  storage::StudyRepository& studies_;  // a trial job's study and trial, for the lineage
  storage::ModelRepository& models_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_MODEL_REGISTRAR_H_
