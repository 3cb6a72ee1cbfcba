// GenerationRouter: decides which gantry-worker serves a Generate call. Pure logic (no gRPC, no
// SQL): the job coordinator feeds it from the worker protocol (Register: endpoint and secret;
// Connect/Disconnect/lease expiry: liveness; heartbeats: loaded models and the worker's own load)
// and the GenerationService asks it for candidates and reports what it dispatched.
//
// Policy (Candidates):
//  1. Only workers that registered a generation_endpoint and whose control stream is connected
//     and not expired take part.
//  2. Workers that have the model loaded (last heartbeat, or a call the router dispatched there
//     since) come first; among them the least busy first.
//  3. Then every other serving worker, least busy first: the first of them loads the model.
//  4. A worker whose endpoint failed recently (MarkUnreachable) goes to the end of the list for
//     kUnreachablePenalty, so new calls do not keep dialling a dead endpoint first.
// "Busy" is, in order: the showers the server itself has dispatched to the worker and not yet
// received back, the calls in flight there, then the worker's own heartbeat (queued showers,
// active calls), which is up to one heartbeat interval old; ties go to the name (deterministic).
#ifndef GANTRY_SCHEDULER_GENERATION_ROUTER_H_
#define GANTRY_SCHEDULER_GENERATION_ROUTER_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gantry/v1/worker.pb.h"

namespace gantry::scheduler {

// Thread-safe. Every method takes the caller's clock reading where time matters (tests inject it).
class GenerationRouter {
 public:
  static constexpr absl::Duration kUnreachablePenalty = absl::Seconds(5);

  // One worker the service may call, as Candidates returns it.
  struct Candidate {
    std::string worker_id;
    std::string name;
    std::string endpoint;  // "host:port" of its WorkerGenerationService
    std::string secret;    // sent as `authorization: Bearer <secret>`
    bool has_model = false;
  };

  // What the router knows about every worker (for logs and tests).
  struct WorkerView {
    std::string worker_id;
    std::string name;
    std::string endpoint;
    bool connected = false;
    std::set<std::string> loaded_models;  // checkpoint sha256s
    int64_t dispatched_requests = 0;      // calls in flight that this server made
    int64_t dispatched_showers = 0;       // showers of those calls not received yet
    int32_t reported_active_requests = 0;
    int64_t reported_queued_showers = 0;
  };

  // Register: (re)sets the worker's endpoint and secret; an empty endpoint means it does not
  // serve. Daemons register at the start of every session (a restart, a reconnect): what it had
  // loaded is forgotten until its next heartbeat says again.
  void OnRegister(const std::string& worker_id, const gantry::v1::RegisterRequest& request);
  // The control stream opened (a valid hello) or ended / its lease expired.
  void OnConnect(const std::string& worker_id);
  void OnDisconnect(const std::string& worker_id);
  // A heartbeat: replaces the loaded models and the reported load.
  void OnHeartbeat(const std::string& worker_id, const gantry::v1::Heartbeat& heartbeat);

  // The workers to try for a model, best first (see the policy above). Empty when none serves.
  std::vector<Candidate> Candidates(const std::string& checkpoint_sha256, absl::Time now) const;

  // Dispatch accounting, called by the service around each worker call: Begin before the call,
  // Received for every chunk (showers in it), End when the call ends (`showers_left` = showers
  // asked for and never received). Begin on an unknown worker is a no-op.
  void Begin(const std::string& worker_id, const std::string& checkpoint_sha256, int64_t showers);
  void Received(const std::string& worker_id, int64_t showers);
  void End(const std::string& worker_id, int64_t showers_left);
  // The worker could not be reached (UNAVAILABLE before any chunk).
  void MarkUnreachable(const std::string& worker_id, absl::Time now);
  // A call to it succeeded or produced a chunk: it is reachable again.
  void MarkReachable(const std::string& worker_id);

  // How many workers serve generation right now (registered an endpoint and connected).
  int ServingWorkers() const;
  std::vector<WorkerView> Snapshot() const;

 private:
  struct Worker {
    WorkerView view;
    std::string secret;
    absl::Time unreachable_until = absl::InfinitePast();
  };

  mutable absl::Mutex mu_;
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gantry::scheduler

#endif  // GANTRY_SCHEDULER_GENERATION_ROUTER_H_
