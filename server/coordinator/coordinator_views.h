// What the coordinator shows to the parts of the server outside it (the pool autoscaler, the
// /metrics collector): copies taken under its lock, and the few changes the pools may ask of it.
// Nothing outside server/coordinator/ reads or locks CoordinatorState itself.
#ifndef GANTRY_SERVER_COORDINATOR_COORDINATOR_VIEWS_H_
#define GANTRY_SERVER_COORDINATOR_COORDINATOR_VIEWS_H_

#include <map>
#include <string>
#include <vector>

#include "gantry/v1/worker.pb.h"
#include "scheduler/types.h"

namespace gantry::server {

// One registered worker as the coordinator sees it.
struct WorkerView {
  std::string id;
  std::string name;
  std::map<std::string, std::string> labels;
  gantry::v1::DeviceKind device = gantry::v1::DEVICE_KIND_UNSPECIFIED;
  int slots = 0;           // registered
  int free_slots = 0;      // usable now (the scheduler's view; 0 when disconnected or lost)
  int leased_slots = 0;    // held by placed jobs
  int running_ranks = 0;   // in its latest heartbeat to this server
  bool connected = false;  // has a stream to this server
  bool live = false;       // connected and not lost: the scheduler may place on it
  bool draining = false;   // drained by an operator, or preempting (RetireIdle does not set it)
};

struct CoordinatorSnapshot {
  std::vector<WorkerView> workers;  // every registered worker, by id
  // The scheduler's queue in priority order, without the jobs held back for their tenant's quota
  // (the autoscaler's demand).
  std::vector<scheduler::JobRequest> demand;
  int queued_jobs = 0;  // every job in the scheduler's queue
};

// What the pool autoscaler may see of the coordinator and ask of it. JobCoordinator implements it;
// tests of the autoscaler can hand it another.
class PoolControl {
 public:
  virtual ~PoolControl() = default;

  virtual CoordinatorSnapshot Snapshot() const = 0;
  // Drains, for removal, each of `worker_ids` that is idle and not draining now (checked and
  // drained under the coordinator's lock, so nothing is placed on it after this decision) and
  // returns those; busy or draining ones are left alone. An id the coordinator no longer knows
  // counts as idle (a worker that left since the snapshot loses nothing by its removal).
  virtual std::vector<std::string> RetireIdle(const std::vector<std::string>& worker_ids) = 0;
  // Puts workers RetireIdle drained back in service (their removal failed); a worker an operator
  // drained, or that announced a preemption, stays drained.
  virtual void Unretire(const std::vector<std::string>& worker_ids) = 0;
  // The autoscaler's word on queued jobs (e.g. "pool hpc cannot scale up: ..."), appended to the
  // scheduler's wait reason in their messages. Drops the notes of jobs no longer queued and of
  // every job in `considered`, then sets `notes` (by job id).
  virtual void SetPoolNotes(const std::vector<std::string>& considered,
                            std::map<std::string, std::string> notes) = 0;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_COORDINATOR_VIEWS_H_
