#include "server/coordinator/pool_resolver.h"

#include <vector>

#include "base/status_macros.h"
#include "scheduler/pool_choice.h"
#include "server/requests/pool_requests.h"

namespace gantry::server {

absl::StatusOr<std::string> ResolveJobPool(storage::PoolRepository& pools,
                                           const gantry::v1::JobSpec& spec) {
  ASSIGN_OR_RETURN(std::vector<gantry::v1::Pool> stored, pools.List());
  std::vector<scheduler::PoolConfig> configs;
  for (const gantry::v1::Pool& pool : stored) configs.push_back(PoolConfigOf(pool));
  scheduler::PoolRequirements job;
  job.pool = spec.pool();
  job.device = spec.resources_per_rank().device();
  job.selector.insert(spec.worker_selector().begin(), spec.worker_selector().end());
  job.allow_preemptible = spec.allow_preemptible();
  job.world_size = spec.world_size();
  return scheduler::ChoosePool(configs, job);
}

}  // namespace gantry::server
