#include "server/coordinator/job_coordinator.h"

namespace gantry::server {

JobCoordinator::JobCoordinator(const CoordinatorDeps& deps, scheduler::GenerationRouter* router)
    : state_(scheduler::SchedulerOptions{absl::Milliseconds(deps.options.lease_timeout_ms)},
             deps.clock),
      lifecycle_(deps.jobs, deps.pools, deps.datasets, state_),
      registrar_(deps.jobs, deps.blobs, deps.studies, deps.models),
      sessions_(deps.jobs, deps.identities, deps.options.progress_event_interval, state_,
                lifecycle_, registrar_, router),
      loop_(deps, state_, lifecycle_, router) {}

}  // namespace gantry::server
