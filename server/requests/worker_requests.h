// Worker requests: the checks of WorkerService registrations and checkpoint upload headers.
#ifndef GANTRY_SERVER_REQUESTS_WORKER_REQUESTS_H_
#define GANTRY_SERVER_REQUESTS_WORKER_REQUESTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gantry/v1/worker.pb.h"
#include "server/requests/field_checks.h"

namespace gantry::server {

absl::Status ValidateRegister(const gantry::v1::RegisterRequest& request);
absl::Status ValidateCheckpointHeader(const gantry::v1::CheckpointHeader& header,
                                      int64_t max_bytes);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_REQUESTS_WORKER_REQUESTS_H_
