// Checks of AdminService pool requests, and the scheduler's view of a stored pool.
#ifndef GANTRY_SERVER_REQUESTS_POOL_REQUESTS_H_
#define GANTRY_SERVER_REQUESTS_POOL_REQUESTS_H_

#include <string>

#include "absl/status/status.h"
#include "gantry/v1/admin.pb.h"
#include "scheduler/pool_types.h"

namespace gantry::server {

// INVALID_ARGUMENT naming the field and what to change: name [a-z][a-z0-9-]{0,62}; price finite
// and >= 0; slots_per_worker 0..256 (0 = 1); elastic pools (command, slurm) max_workers 1..10000
// and min_workers 0..max_workers; static pools min_workers <= max_workers when either is set;
// labels [A-Za-z0-9._-] without the key "pool"; command argv[0] an absolute path, at most 64
// arguments of at most 4096 bytes without NUL, timeout 0..3600 s; slurm server_address host:port,
// absolute join_token_file, worker_binary, slurm_conf and work_dir, partition [A-Za-z0-9._-],
// time limit 0..10080 min, idle exit 0..86400 s, sbatch/daemon arguments starting with "--".
absl::Status ValidatePool(const std::string& name, const gantry::v1::PoolSpec& spec);

// The autoscaler's and ChoosePool's view of a stored pool.
scheduler::PoolConfig PoolConfigOf(const gantry::v1::Pool& pool);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_REQUESTS_POOL_REQUESTS_H_
