// ChoosePool: the pool a job runs in: the one it names, else the cheapest eligible one.
#ifndef GANTRY_SCHEDULER_POOL_CHOICE_H_
#define GANTRY_SCHEDULER_POOL_CHOICE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gantry/v1/common.pb.h"
#include "scheduler/pool_types.h"

namespace gantry::scheduler {

// What a job asks of a pool.
struct PoolRequirements {
  std::string pool;  // named by the spec; "" = choose
  gantry::v1::DeviceKind device = gantry::v1::DEVICE_KIND_CPU;
  std::map<std::string, std::string> selector;  // pool=NAME here counts as naming it
  bool allow_preemptible = false;
  int world_size = 1;
};

// With no pools defined: "" (any matching worker, as without pools). A named pool (spec or
// selector) must exist (INVALID_ARGUMENT naming the known pools) and match the device
// (FAILED_PRECONDITION: its workers never will); a named preemptible pool is used even without
// allow_preemptible. Otherwise
// the eligible pools are those with the job's device, every selector pair among {pool=name} and
// the pool's labels, not preemptible unless allowed, and (elastic ones) max_workers *
// slots_per_worker >= world_size; the cheapest wins (ties: by name). "" when none is eligible: the
// job then waits for any matching worker, as without pools.
absl::StatusOr<std::string> ChoosePool(const std::vector<PoolConfig>& pools,
                                       const PoolRequirements& job);

}  // namespace gantry::scheduler

#endif  // GANTRY_SCHEDULER_POOL_CHOICE_H_
