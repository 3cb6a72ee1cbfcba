// Dataset requests: the checks of a DatasetService upload header.
#ifndef GANTRY_SERVER_REQUESTS_DATASET_REQUESTS_H_
#define GANTRY_SERVER_REQUESTS_DATASET_REQUESTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gantry/v1/datasets.pb.h"
#include "server/requests/field_checks.h"

namespace gantry::server {

// `max_bytes` is the server's dataset size limit (RESOURCE_EXHAUSTED above it).
absl::Status ValidateUploadHeader(const gantry::v1::UploadDatasetHeader& header, int64_t max_bytes);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_REQUESTS_DATASET_REQUESTS_H_
