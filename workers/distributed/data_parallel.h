// DataParallel: synchronous data-parallel training of a gan::Trainer over a Communicator: rank 0's
// initial state broadcast, bucketed gradient all-reduce overlapped with backward, synchronised
// BatchNorm.
#ifndef GANTRY_WORKERS_DISTRIBUTED_DATA_PARALLEL_H_
#define GANTRY_WORKERS_DISTRIBUTED_DATA_PARALLEL_H_

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/nn/module.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "workers/distributed/communicator.h"
#include "workers/gan/trainer.h"

namespace gantry::distributed {

struct DataParallelOptions {
  int64_t bucket_bytes = 1 << 20;  // gradient buckets (reverse registration order, like torch DDP)
  // Launch a bucket's all-reduce as soon as its gradients are ready during backward (off: all
  // buckets are launched after backward returns).
  bool overlap = true;
  bool sync_batch_norm = true;
};

struct DataParallelStats {
  // Gradient all-reduce rounds: one per trainer gradient hook, i.e. 2 per Step (discriminator
  // real, fake) + generator_steps (generator updates).
  int64_t reductions = 0;
  double allreduce_seconds = 0;  // wall time from first bucket launch to last bucket done, summed
  // Time the trainer waited for all-reduce after backward returned, summed.
  double exposed_seconds = 0;
  double bytes = 0;  // gradient bytes all-reduced (per rank)
};

// Lifetime: create after the Trainer and the Communicator, destroy before either; the destructor
// removes the hooks it installed. Training runs on one thread (the autograd hooks run on it during
// backward; only bucket completion times are recorded from Gloo's threads); stats() is thread-safe.
class DataParallel {
 public:
  // Checks that every rank has the same data set size, batch and world size (FAILED_PRECONDITION
  // on all ranks otherwise), broadcasts rank 0's parameters and buffers of both networks, its RNG
  // state and epoch counters (so all ranks start identical and draw the same global stream whatever
  // their seed), installs the per-parameter autograd hooks that fill buckets and launch async
  // all-reduces while backward still runs, the trainer's gradient hook (waits, averages by world
  // size, writes back to .grad) and, with sync_batch_norm, the trainer's cross-rank sum.
  // The Trainer must have been created with the communicator's world_size and rank.
  static absl::StatusOr<std::unique_ptr<DataParallel>> Attach(gan::Trainer& trainer,
                                                              Communicator& comm,
                                                              const DataParallelOptions& options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  DataParallelStats stats() const;

 private:
  using Clock = std::chrono::steady_clock;

  // A flat gradient buffer for consecutive parameters (in reverse registration order).
  struct Bucket {
    std::vector<size_t> params;  // indices into ParamSet::params
    at::Tensor buffer;           // float32, all params of the bucket back to back
    int64_t pending = 0;         // parameters whose gradient has not arrived this round
    bool launched = false;
    c10::intrusive_ptr<c10d::Work> work;
  };
  // The parameters of one network and their buckets.
  struct ParamSet {
    torch::nn::Module* module = nullptr;
    std::vector<at::Tensor> params;
    std::vector<unsigned> hook_handles;
    std::vector<size_t> bucket_of;  // per param
    std::vector<int64_t> offset;    // per param, in its bucket
    std::vector<bool> filled;       // per param, this round
    std::vector<Bucket> buckets;    // launch order
    size_t next_launch = 0;
    bool first_launch_recorded = false;
    Clock::time_point first_launch;
  };

  DataParallel(gan::Trainer& trainer, Communicator& comm, const DataParallelOptions& options);

  absl::Status BroadcastInitialState();
  void BuildBuckets(ParamSet& set, torch::nn::Module& module);
  void OnGradient(ParamSet& set, size_t index, const at::Tensor& grad);
  void LaunchReady(ParamSet& set, bool force);
  void Launch(ParamSet& set, Bucket& bucket);
  absl::Status FinishRound(torch::nn::Module& model);
  void ResetRound(ParamSet& set);

  gan::Trainer& trainer_;
  Communicator& comm_;
  DataParallelOptions options_;
  ParamSet generator_;
  ParamSet discriminator_;
  absl::Status launch_error_;  // a launch that failed inside backward, reported by FinishRound

  mutable absl::Mutex stats_mu_;  // stats() may be read from a progress-reporting thread
  DataParallelStats stats_ ABSL_GUARDED_BY(stats_mu_);

  // Completion time of the latest bucket of the current round (written by Gloo's threads).
  mutable absl::Mutex done_mu_;
  Clock::time_point last_done_ ABSL_GUARDED_BY(done_mu_);
};

}  // namespace gantry::distributed

#endif  // GANTRY_WORKERS_DISTRIBUTED_DATA_PARALLEL_H_
