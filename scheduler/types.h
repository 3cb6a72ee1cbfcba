// The value types the Scheduler takes and returns: workers, job requests, placements, lost workers.
#ifndef GANTRY_SCHEDULER_TYPES_H_
#define GANTRY_SCHEDULER_TYPES_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gantry/v1/common.pb.h"

namespace gantry::scheduler {

// A worker daemon as the scheduler sees it: how many ranks it can host and what it offers.
struct WorkerState {
  std::string id;  // "wrk-..."
  std::string name;
  int slots = 0;                                                // ranks it can host
  gantry::v1::DeviceKind device = gantry::v1::DEVICE_KIND_CPU;  // UNSPECIFIED counts as CPU
  std::map<std::string, std::string> labels;
  std::string host;  // advertise host (rendezvous address when it hosts rank 0)
  int port_min = 29400, port_max = 29499;  // rendezvous ports it offers (inclusive)
  std::set<std::string> cached_datasets;   // dataset keys (sha256) it caches
};

// A training job waiting for a gang of `world_size` slots.
struct JobRequest {
  std::string id;        // "job-..."
  std::string tenant;    // its owner: fair share and quotas ("" = a tenant of its own)
  int priority = 0;      // higher first
  absl::Time submitted;  // earlier first among equal priority
  int world_size = 1;
  gantry::v1::DeviceKind device = gantry::v1::DEVICE_KIND_CPU;  // UNSPECIFIED counts as CPU
  // Every pair must be among the worker's labels; "pool" names the pool its quota counts in.
  std::map<std::string, std::string> selector;
  std::string dataset_key;  // sha256 of its dataset when known ("" = no cache preference)
};

// Where a job's ranks run and where they meet.
struct Placement {
  std::string job_id;
  std::vector<std::string> rank_workers;  // rank_workers[r] = worker id hosting rank r
  std::string rendezvous_host;            // host of rank 0's worker
  int rendezvous_port = 0;  // a port from rank 0's worker range not leased to another running job
};

// A worker that went silent, with the jobs that lost their leases because of it.
struct LostWorker {
  std::string worker_id;
  std::vector<std::string>
      job_ids;  // jobs that had a rank on it (their leases are now released everywhere)
};

// A tenant's share of the workers (Scheduler::SetTenantPolicies); tenants without one get the
// defaults: weight 1, no quota.
struct TenantPolicy {
  double weight = 1;  // > 0: the fair-share order compares slots held / weight
  // Pool name -> the most slots the tenant's placed jobs may hold there at once (0 = no quota).
  std::map<std::string, int> max_slots_per_pool;
};

struct SchedulerOptions {
  absl::Duration lease_timeout = absl::Seconds(15);  // silent longer than this = lost
  // Reserve workers for the first job of each requirement that does not fit (see Scheduler).
  bool reservations = true;
};

}  // namespace gantry::scheduler

#endif  // GANTRY_SCHEDULER_TYPES_H_
