// Autoscaler: decides how many workers each elastic pool should gain or lose, from its workers,
// its waiting jobs and its provisioning state at an injected time.
//
// Pure logic like the Scheduler: no I/O, no clock, no threads; the server's PoolAutoscaler acts on
// the plan (off its scheduling loop). Rules, per elastic pool:
// - Gangs: waiting jobs are taken in queue order; a job first uses the pool's free slots, then the
//   slots of pending workers, then new workers. A job whose whole gang cannot fit within
//   max_workers gets no workers at all (never half a gang) and a note saying so.
// - min_workers: live plus pending workers are topped up to it.
// - Backoff: while backoff_until is in the future, or a provisioner run is in flight, no scale-up
//   (waiting jobs get a note naming the last error).
// - Scale down: only when the pool has no waiting job and nothing pending: workers with no busy
//   slot, not draining, idle for at least idle_timeout, oldest idle first, down to min_workers
//   (0 = scale to zero). A worker with a busy slot is never chosen.
#ifndef GANTRY_SCHEDULER_AUTOSCALER_H_
#define GANTRY_SCHEDULER_AUTOSCALER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "scheduler/pool_types.h"

namespace gantry::scheduler {

class Autoscaler {
 public:
  explicit Autoscaler(AutoscalerOptions options) : options_(options) {}

  // `workers` and `jobs` may name pools that are not in `pools` (ignored) and static pools (only
  // counted). `provisioning` has an entry per pool or none (all defaults).
  AutoscalePlan Plan(const std::vector<PoolConfig>& pools, const std::vector<PoolWorker>& workers,
                     const std::vector<PoolJob>& jobs,
                     const std::map<std::string, PoolProvisioning>& provisioning,
                     absl::Time now) const;

 private:
  AutoscalerOptions options_;
};

}  // namespace gantry::scheduler

#endif  // GANTRY_SCHEDULER_AUTOSCALER_H_
