// CallFirstReachable: the failover of every call the gateway proxies to a serving worker (Generate,
// ExportModel). Candidates come from the GenerationRouter in its order; a worker that could not be
// reached is skipped for the next, and the router learns which workers answered.
#ifndef GANTRY_SERVER_GATEWAY_WORKER_FAILOVER_H_
#define GANTRY_SERVER_GATEWAY_WORKER_FAILOVER_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "grpcpp/server_context.h"
#include "scheduler/generation_router.h"

namespace gantry::server {

// What one call to one worker came to.
struct WorkerAttempt {
  absl::Status status;
  bool answered = false;  // the worker sent at least one message
};

// Calls `call` on each of `candidates` in order. A call that failed UNAVAILABLE before the worker
// answered, while the client is still there, marks that worker unreachable and moves on: nothing
// reached the client yet. Any other outcome (success, the worker's verdict on the request, an
// error after part of the result went out) marks the worker reachable and is returned. When every
// candidate was unreachable: UNAVAILABLE "<unreachable_message>: name (endpoint): why; ...", with
// the error reason `unreachable_reason` when not empty. *worker_name is the last worker tried.
absl::Status CallFirstReachable(
    scheduler::GenerationRouter& router,
    const std::vector<scheduler::GenerationRouter::Candidate>& candidates,
    const grpc::ServerContext& context, const std::string& unreachable_message,
    const std::string& unreachable_reason, std::string* worker_name,
    absl::FunctionRef<WorkerAttempt(const scheduler::GenerationRouter::Candidate&)> call);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_GATEWAY_WORKER_FAILOVER_H_
