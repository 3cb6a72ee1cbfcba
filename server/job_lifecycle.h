// JobLifecycle: every state transition the coordinator writes for a job (QUEUED -> PLACING ->
// RUNNING -> SUCCEEDED / FAILED / CANCELLED, and the end of jobs lost over a server restart).
#ifndef GANTRY_SERVER_JOB_LIFECYCLE_H_
#define GANTRY_SERVER_JOB_LIFECYCLE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gantry/v1/training.pb.h"
#include "server/backend.h"
#include "server/coordinator_state.h"

namespace gantry::server {

// Thread-safe. Each call writes the database without holding `state.mu`, then takes the lock to
// bring the in-memory view in line. `backend` and `state` must outlive it.
class JobLifecycle {
 public:
  JobLifecycle(Backend& backend, CoordinatorState& state) : backend_(backend), state_(state) {}

  // QUEUED -> PLACING; an error when the job left QUEUED meanwhile (cancelled).
  absl::StatusOr<gantry::v1::Job> StartPlacing(const std::string& job_id,
                                               const std::string& message);
  // PLACING -> RUNNING once all `ranks` ranks joined the process group.
  void StartRunning(const std::string& job_id, int ranks);
  // Moves the job to `to` unless it already left `from`; marks it ended and tells its other ranks
  // to stop when `to` is terminal.
  void End(const std::string& job_id, const std::vector<gantry::v1::JobState>& from,
           gantry::v1::JobState to, const std::string& reason, const std::string& message);
  // Ends a job the database had active at start that no worker claimed within `wait`:
  // CANCELLING -> CANCELLED, otherwise FAILED with reason "Lost".
  void EndUnclaimed(const gantry::v1::Job& job, absl::Duration wait);
  // Reads the jobs the database has active into state.orphans once; false when it cannot.
  bool LoadOrphans();
  // Appends an event to the job's log; a failure is logged, not returned.
  void AppendEventOrLog(const std::string& job_id, const gantry::v1::JobEvent& event);

 private:
  Backend& backend_;
  CoordinatorState& state_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_JOB_LIFECYCLE_H_
