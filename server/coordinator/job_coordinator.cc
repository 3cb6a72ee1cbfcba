#include "server/coordinator/job_coordinator.h"

namespace gantry::server {

JobCoordinator::JobCoordinator(Backend& backend, GenerationRouter* router)
    : state_(scheduler::SchedulerOptions{absl::Milliseconds(backend.options.coordinator.lease_timeout_ms)}),
      lifecycle_(backend, state_),
      registrar_(backend),
      sessions_(backend, state_, lifecycle_, registrar_, router),
      loop_(backend, state_, lifecycle_, router) {}

}  // namespace gantry::server
