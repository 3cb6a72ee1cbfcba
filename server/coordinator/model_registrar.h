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
  // model reference "name:version". With spec.checkpoint_policy.register_best the version is the
  // job's lowest-fom checkpoint when it scored strictly better than the final one, with its
  // validation point's metrics and histograms (and BF16 NOT_CHECKED: the rank checked the final).
  absl::StatusOr<std::string> Register(const std::string& job_id, const std::string& owner,
                                       const gantry::v1::JobSpec& spec,
                                       const gantry::v1::JobResult& result);

 private:
  // What is registered: the result (its checkpoint, metrics, histograms, BF16 check) and the
  // checkpoint's record (its step and epoch).
  struct RegisteredCheckpoint {
    gantry::v1::JobResult result;
    gantry::v1::CheckpointSaved checkpoint;
  };
  absl::StatusOr<RegisteredCheckpoint> Choose(const std::string& job_id,
                                              const gantry::v1::JobSpec& spec,
                                              const gantry::v1::JobResult& result,
                                              const gantry::v1::CheckpointSaved& final_checkpoint);

  storage::JobRepository& jobs_;
  storage::BlobStore& blobs_;          // the checkpoint's stored size
  storage::StudyRepository& studies_;  // a trial job's study and trial, for the lineage
  storage::ModelRepository& models_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_MODEL_REGISTRAR_H_
