// Generation requests: the checks of a GenerateRequest, on its own and against the resolved model.
#ifndef GANTRY_SERVER_REQUESTS_GENERATION_REQUESTS_H_
#define GANTRY_SERVER_REQUESTS_GENERATION_REQUESTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gantry/v1/catalog.pb.h"
#include "gantry/v1/generation.pb.h"
#include "server/requests/field_checks.h"

namespace gantry::server {

// Checks a generation request on its own (syntax, finiteness, counts). More than `max_showers`
// showers (the tenant's limit max_showers_per_request; 0 = unlimited) is RESOURCE_EXHAUSTED
// naming the limit and how to raise it, with ErrorInfo QUOTA_EXCEEDED; it is checked before the
// conditions are.
absl::Status ValidateGenerateRequest(const gantry::v1::GenerateRequest& request,
                                     int64_t max_showers);
// Checks it against the resolved model: status, particle, energy and angle inside the training
// ranges.
absl::Status ValidateGenerateForModel(const gantry::v1::GenerateRequest& request,
                                      const gantry::v1::ModelVersion& model);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_REQUESTS_GENERATION_REQUESTS_H_
