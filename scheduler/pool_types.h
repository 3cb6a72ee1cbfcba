// The value types of elastic pools the Autoscaler and ChoosePool take and return: pools, their
// workers and waiting jobs in, scale-up and scale-down decisions out.
#ifndef GANTRY_SCHEDULER_POOL_TYPES_H_
#define GANTRY_SCHEDULER_POOL_TYPES_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gantry/v1/common.pb.h"

namespace gantry::scheduler {

// A pool as the autoscaler sees it (gantry.v1.PoolSpec without the provisioner's settings).
struct PoolConfig {
  std::string name;
  gantry::v1::DeviceKind device = gantry::v1::DEVICE_KIND_CPU;  // UNSPECIFIED counts as CPU
  double price_per_device_hour = 0;
  bool preemptible = false;
  int min_workers = 0;
  int max_workers = 0;
  int slots_per_worker = 1;
  bool elastic = false;                       // false: a static pool, never scaled
  std::map<std::string, std::string> labels;  // its workers' labels besides pool=name
};

// A connected worker of a pool.
struct PoolWorker {
  std::string id;
  std::string pool;
  int slots = 0;
  int busy_slots = 0;  // slots leased to jobs or running ranks
  bool draining = false;
  // When it last had a busy slot (or joined); the idle timeout counts from here.
  absl::Time idle_since = absl::InfinitePast();
};

// A queued job that waits for slots in a pool (in queue order).
struct PoolJob {
  std::string id;
  std::string pool;
  int world_size = 1;
};

// What the server knows about a pool's provisioning besides its workers.
struct PoolProvisioning {
  int pending_workers = 0;                          // asked for, not joined yet
  bool call_in_flight = false;                      // a provisioner run is going on
  absl::Time backoff_until = absl::InfinitePast();  // no scale-up before (after failures)
  std::string last_error;                           // "" after a success
};

struct AutoscalerOptions {
  absl::Duration idle_timeout = absl::Seconds(60);  // idle workers above min are removed after it
};

// Add `count` workers to `pool` for `job_ids` (whole gangs; empty for min_workers).
struct ScaleUp {
  std::string pool;
  int count = 0;
  std::vector<std::string> job_ids;
};

// Remove these idle workers of `pool` (none has a busy slot).
struct ScaleDown {
  std::string pool;
  std::vector<std::string> worker_ids;
};

// One pass of the Autoscaler.
struct AutoscalePlan {
  std::vector<ScaleUp> scale_ups;
  std::vector<ScaleDown> scale_downs;
  // Why a waiting job's pool does not grow for it, e.g. "pool hpc cannot grow to 5 workers
  // (max_workers 4)"; only jobs with such a reason appear.
  std::map<std::string, std::string> job_notes;
  std::map<std::string, int> waiting_jobs;  // per pool
};

}  // namespace gantry::scheduler

#endif  // GANTRY_SCHEDULER_POOL_TYPES_H_
