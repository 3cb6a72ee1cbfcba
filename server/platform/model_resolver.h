// ModelResolver: model references ("name:version", "name@alias", optionally "owner/...") resolved
// to model versions as a viewer sees them, through a cache that changes made here clear.
#ifndef GANTRY_SERVER_PLATFORM_MODEL_RESOLVER_H_
#define GANTRY_SERVER_PLATFORM_MODEL_RESOLVER_H_

#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/catalog.pb.h"

namespace gantry::server {

// Thread-safe (every implementation must be). Implemented by the Backend.
class ModelResolver {
 public:
  virtual ~ModelResolver() = default;

  // ModelRepository::Resolve for `viewer` (histograms left out); only successes are cached, so a
  // model registered a moment ago resolves at once.
  virtual absl::StatusOr<gantry::v1::ModelVersion> ResolveModel(const std::string& viewer,
                                                                const std::string& ref) = 0;
  // Forget cached model references (after an alias or archive change).
  virtual void ForgetModels() = 0;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_MODEL_RESOLVER_H_
