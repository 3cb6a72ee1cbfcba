// DynamicBatcher: merges the showers of concurrent generation requests for one model into batches
// (Triton semantics: a batch runs when max_batch_size showers wait or when the oldest waiting
// shower has waited max_queue_delay) and streams each request's showers back in chunks.
//
// - Priorities: a request carries a priority, capped at priority_levels - 1; batches are filled
//   from the highest priority present down, so a lower-priority request gets showers into a batch
//   only when no higher-priority one has room.
// - Fairness: within a priority, batches are filled round-robin, one shower per request per turn,
//   so a bulk request never starves single-shower requests.
// - Bounded queue: at most max_queued_requests requests with showers still to produce; Submit
//   answers RESOURCE_EXHAUSTED beyond that.
// - Deadlines and cancellation: an expired request ends with DEADLINE_EXCEEDED, a cancelled one
//   with CANCELLED; neither gets showers in batches not yet run (showers of a batch already running
//   are discarded).
// - Backpressure: a request holds at most max(buffered_chunks * chunk_showers, 2 * max_batch_size)
//   produced-but-unread showers (counting those in the running batch); the batcher skips it until
//   its consumer reads, so a 100,000-shower request streams in bounded memory.
// - One batch at a time: a single scheduler thread per model calls the backend; batchers given the
//   same compute slot (a mutex) never run batches at the same time, so several models on a worker
//   share the cores instead of thrashing them.
// Thread-safe. Torch-free: the model is a BatchBackend.
#ifndef GANTRY_WORKERS_SERVING_DYNAMIC_BATCHER_H_
#define GANTRY_WORKERS_SERVING_DYNAMIC_BATCHER_H_

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "workers/serving/batch_backend.h"
#include "workers/serving/generation_plan.h"

namespace gantry::serving {

struct BatcherOptions {
  int max_batch_size = 128;  // showers per batch
  absl::Duration max_queue_delay =
      absl::Milliseconds(2);       // wait for more showers at most this long
  int max_queued_requests = 1024;  // requests with showers still to produce
  int buffered_chunks = 2;         // per request, see backpressure above
  int priority_levels = 1;         // distinct priorities, 1..kMaxPriorityLevels
};

// Most priority levels a model's batcher takes (GenerateRequest.priority is 0..9).
inline constexpr int kMaxPriorityLevels = 10;

bool operator==(const BatcherOptions& a, const BatcherOptions& b);
inline bool operator!=(const BatcherOptions& a, const BatcherOptions& b) { return !(a == b); }

class DynamicBatcher {
 public:
  // Showers [offset, offset + count) of one request: count * cells_per_shower floats.
  struct Chunk {
    int64_t offset = 0;
    int64_t count = 0;
    std::vector<ShowerSpec> showers;  // the conditions of each shower
    std::vector<float> cells;
  };
  struct Stats {
    int64_t batches = 0;          // batches run
    int64_t batched_showers = 0;  // showers in them (batched_showers / batches = mean batch size)
    int64_t largest_batch = 0;
    int active_requests = 0;     // submitted and not yet finished or read to the end
    int64_t queued_showers = 0;  // asked for and not yet produced
  };

  class Stream;

  // `backend` must outlive the batcher; `compute_slot` may be null (no sharing).
  DynamicBatcher(BatcherOptions options, BatchBackend* backend,
                 std::shared_ptr<absl::Mutex> compute_slot);
  // Ends every unfinished request with UNAVAILABLE and joins the scheduler. Every Stream must be
  // destroyed before the batcher.
  ~DynamicBatcher();
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Queues a request at `priority` (higher first; below 0 counts as 0, above priority_levels - 1
  // as priority_levels - 1). RESOURCE_EXHAUSTED (saying the limit and what to do) when the queue
  // is full.
  absl::StatusOr<std::unique_ptr<Stream>> Submit(GenerationPlan plan, absl::Time deadline,
                                                 int priority = 0);

  Stats stats() const;
  const BatcherOptions& options() const { return options_; }

 private:
  struct Request;
  struct Part {
    std::shared_ptr<Request> request;
    int64_t first = 0;
    int64_t count = 0;
  };

  void SchedulerLoop();
  // Ends expired requests; returns the earliest pending deadline.
  absl::Time ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t RoomLocked(const Request& r) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Picks the next batch: highest priority first, round-robin within a priority.
  std::vector<Part> TakeBatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `specs` are the batch's showers in order (the parts' showers, back to back).
  void DeliverLocked(const std::vector<Part>& parts, const std::vector<ShowerSpec>& specs,
                     const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveIfIdleLocked(const std::shared_ptr<Request>& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishLocked(Request& r, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const BatcherOptions options_;
  BatchBackend* const backend_;
  const std::shared_ptr<absl::Mutex> compute_slot_;

  mutable absl::Mutex mu_;
  absl::CondVar work_;  // the scheduler waits on it
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Requests with showers still to produce or in the running batch, in arrival order.
  std::list<std::shared_ptr<Request>> queue_ ABSL_GUARDED_BY(mu_);
  size_t round_robin_ ABSL_GUARDED_BY(mu_) = 0;  // where the next batch starts filling
  int active_ ABSL_GUARDED_BY(mu_) = 0;          // Streams not yet at their end
  Stats stats_ ABSL_GUARDED_BY(mu_);

  std::vector<float> batch_cells_;  // scheduler thread only
  std::thread scheduler_;           // last: started once everything above exists
};

// The consumer's handle of one request. Not thread-safe (one reader); cancels on destruction
// if not read to the end.
class DynamicBatcher::Stream {
 public:
  enum class Poll { kChunk, kDone, kWaiting };
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Waits up to `wait` for the next chunk. kChunk: *chunk is filled; kDone: every shower was
  // delivered; kWaiting: nothing yet. Errors: DEADLINE_EXCEEDED, CANCELLED, UNAVAILABLE (model
  // unloaded), or the backend's error.
  absl::StatusOr<Poll> Next(absl::Duration wait, Chunk* chunk);
  // Drops the request's remaining showers from every batch not yet run.
  void Cancel();
  int64_t count() const;

 private:
  friend class DynamicBatcher;
  Stream(DynamicBatcher* batcher, std::shared_ptr<Request> request)
      : batcher_(batcher), request_(std::move(request)) {}
  void EndLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(batcher_->mu_);

  DynamicBatcher* batcher_;
  std::shared_ptr<Request> request_;
  bool ended_ = false;
};

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_DYNAMIC_BATCHER_H_
