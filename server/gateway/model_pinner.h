// ModelPinner: AdminService.LoadModel / UnloadModel on the serving workers, and the stored pins
// kept applied. Load stores the pin (PostgreSQL, so it outlives the server) and calls
// WorkerGenerationService.LoadModel on each target worker at once (in parallel; each loads,
// pins and runs its warm-up batch before answering). A reconcile loop then compares the pins with
// the workers' latest heartbeats every `interval`: a target worker that does not report the model
// pinned with the pin's settings (it restarted, reconnected, or the server restarted) gets
// LoadModel again; a pinned model no pin wants any more on a worker gets UnloadModel. A worker is
// asked again about the same model at most every kRetryAfter.
//
// Targets of a pin: its named workers; else `worker_count` serving workers (those that already
// have it pinned first, then the least busy); else every worker serving generation.
#ifndef GANTRY_SERVER_GATEWAY_MODEL_PINNER_H_
#define GANTRY_SERVER_GATEWAY_MODEL_PINNER_H_

#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/periodic_task.h"
#include "gantry/v1/admin.pb.h"
#include "gantry/v1/catalog.pb.h"
#include "scheduler/generation_router.h"
#include "server/coordinator/worker_sessions.h"
#include "server/platform/worker_channel_pool.h"
#include "storage/model_pin_repository.h"
#include "storage/worker_repository.h"

namespace gantry::server {

// Thread-safe. Load, Unload and each reconcile pass run one at a time. Every reference must
// outlive it; Stop (or the destructor) joins the loop. Pins are stored in `model_pins`; named
// targets are checked against `workers`; workers are dialled as `worker_channels` say.
class ModelPinner {
 public:
  static constexpr absl::Duration kRetryAfter = absl::Seconds(10);
  // How long one worker may take to load (fetch included) and warm up a model.
  static constexpr absl::Duration kLoadTimeout = absl::Minutes(3);

  ModelPinner(storage::ModelPinRepository& model_pins, storage::WorkerRepository& workers,
              scheduler::GenerationRouter& router, WorkerSessions& sessions,
              const WorkerChannelSettings& worker_channels,
              absl::Duration interval = absl::Seconds(1));
  ~ModelPinner();
  ModelPinner(const ModelPinner&) = delete;
  ModelPinner& operator=(const ModelPinner&) = delete;

  void Start() { task_.Start(); }
  void Stop() { task_.Stop(); }

  // Pins `model` (resolved by the caller) as `request` asks and loads it on the targets now. The
  // request must be validated (ValidateLoadModel). NOT_FOUND for a named worker that never
  // registered; a named worker that is not connected gets an outcome saying so (it loads when it
  // connects).
  absl::StatusOr<gantry::v1::LoadModelResponse> Load(const gantry::v1::LoadModelRequest& request,
                                                     const gantry::v1::ModelVersion& model);
  // Forgets the pin (NOT_FOUND when there is none) and unloads the checkpoint from every serving
  // worker that has it pinned.
  absl::StatusOr<gantry::v1::UnloadModelResponse> Unload(const gantry::v1::ModelVersion& model);

  // One reconcile pass (the loop's body; tests call it directly).
  void ReconcileOnce();

 private:
  using Candidate = scheduler::GenerationRouter::Candidate;

  std::vector<Candidate> TargetsOf(const storage::ModelPin& pin,
                                   const std::vector<Candidate>& serving,
                                   const std::map<std::string, WorkerReport>& reports) const;
  gantry::v1::ModelLoadOutcome CallLoad(const Candidate& worker,
                                        const gantry::v1::WorkerLoadModelRequest& load);
  gantry::v1::ModelLoadOutcome CallUnload(const Candidate& worker, const std::string& sha256);

  storage::ModelPinRepository& model_pins_;
  storage::WorkerRepository& workers_;
  scheduler::GenerationRouter& router_;
  WorkerSessions& sessions_;
  WorkerChannelPool channels_;

  absl::Mutex op_mu_;  // one Load, Unload or reconcile pass at a time
  // (worker id, checkpoint) -> when it was last asked to load or unload it.
  std::map<std::pair<std::string, std::string>, absl::Time> asked_ ABSL_GUARDED_BY(op_mu_);

  PeriodicTask task_;  // last: its thread stops before the members it reads go
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_GATEWAY_MODEL_PINNER_H_
