// ResolveJobPool: the pool a job's spec runs in, from the stored pools (scheduler::ChoosePool).
#ifndef GANTRY_SERVER_COORDINATOR_POOL_RESOLVER_H_
#define GANTRY_SERVER_COORDINATOR_POOL_RESOLVER_H_

#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/training.pb.h"
#include "storage/pool_repository.h"

namespace gantry::server {

// "" when no pool is defined or none is eligible (the job runs on any matching worker, as without
// pools). INVALID_ARGUMENT for an unknown named pool or one of another device or too small;
// database errors as they come.
absl::StatusOr<std::string> ResolveJobPool(storage::PoolRepository& pools,
                                           const gantry::v1::JobSpec& spec);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_POOL_RESOLVER_H_
