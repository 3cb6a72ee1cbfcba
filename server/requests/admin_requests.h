// Admin requests: the checks of AdminService.LoadModel and UnloadModel.
#ifndef GANTRY_SERVER_REQUESTS_ADMIN_REQUESTS_H_
#define GANTRY_SERVER_REQUESTS_ADMIN_REQUESTS_H_

#include "absl/status/status.h"
#include "gantry/v1/admin.pb.h"
#include "server/requests/field_checks.h"

namespace gantry::server {

inline constexpr int kMaxLoadWorkers = 64;        // named workers per LoadModel
inline constexpr int kMaxLoadWorkerCount = 1000;  // LoadModelRequest.worker_count
inline constexpr int kMaxPriorityLevels = 10;     // BatchingSettings.priority_levels

// model (a reference), workers (at most kMaxLoadWorkers names of at most 256 characters, no
// duplicates), worker_count (0..kMaxLoadWorkerCount, only without workers) and every batching
// setting that is set (the ranges of common.proto's BatchingSettings). INVALID_ARGUMENT naming the
// field.
absl::Status ValidateLoadModel(const gantry::v1::LoadModelRequest& request);
absl::Status ValidateUnloadModel(const gantry::v1::UnloadModelRequest& request);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_REQUESTS_ADMIN_REQUESTS_H_
