// Training requests: the syntax and range checks of TrainingService requests (job specs, listings,
// log tails).
#ifndef GANTRY_SERVER_REQUESTS_TRAINING_REQUESTS_H_
#define GANTRY_SERVER_REQUESTS_TRAINING_REQUESTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gantry/v1/training.pb.h"
#include "server/requests/field_checks.h"

namespace gantry::server {

absl::Status ValidateJobSpec(const gantry::v1::JobSpec& spec);
absl::Status ValidateListJobs(const gantry::v1::ListJobsRequest& request);
absl::Status ValidateGetJobLogs(const gantry::v1::GetJobLogsRequest& request);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_REQUESTS_TRAINING_REQUESTS_H_
