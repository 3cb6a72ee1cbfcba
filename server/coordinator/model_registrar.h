// ModelRegistrar: turns a successful JobResult into a model version in the catalog.
#ifndef GANTRY_SERVER_COORDINATOR_MODEL_REGISTRAR_H_
#define GANTRY_SERVER_COORDINATOR_MODEL_REGISTRAR_H_

#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/training.pb.h"
#include "gantry/v1/worker.pb.h"
#include "server/platform/backend.h"

namespace gantry::server {

// Thread-safe (database I/O only, no state). `backend` must outlive it.
class ModelRegistrar {
 public:
  explicit ModelRegistrar(Backend& backend) : backend_(backend) {}

  // Checks the uploaded checkpoint (one this job uploaded, FAILED_PRECONDITION otherwise, with the
  // size the result states), registers the model version (with lineage, metrics and
  // histograms), records it as the job's model and appends a model_registered event. Returns the
  // model reference "name:version".
  absl::StatusOr<std::string> Register(const std::string& job_id, const std::string& owner,
                                       const gantry::v1::JobSpec& spec,
                                       const gantry::v1::JobResult& result);

 private:
  Backend& backend_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_MODEL_REGISTRAR_H_
