#include "workers/serving/dynamic_batcher.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "workers/serving/serving_metrics.h"

namespace gantry::serving {

struct DynamicBatcher::Request {
  explicit Request(GenerationPlan p) : plan(std::move(p)) {}
  GenerationPlan plan;
  absl::Time submitted;
  absl::Time deadline;
  int priority = 0;         // 0..priority_levels - 1
  int64_t capacity = 0;     // max showers buffered + in flight
  int64_t next_index = 0;   // next shower to put in a batch
  int64_t in_flight = 0;    // showers in the running batch
  int64_t produced = 0;     // showers generated and kept
  int64_t delivered = 0;    // showers handed to the consumer
  std::deque<Chunk> ready;  // complete chunks
  Chunk partial;            // produced showers short of a chunk
  absl::Status status;      // not OK: finished with this error
  bool cancelled = false;
  bool queued = true;  // in queue_
};

bool operator==(const BatcherOptions& a, const BatcherOptions& b) {
  return a.max_batch_size == b.max_batch_size && a.max_queue_delay == b.max_queue_delay &&
         a.max_queued_requests == b.max_queued_requests && a.buffered_chunks == b.buffered_chunks &&
         a.priority_levels == b.priority_levels;
}

DynamicBatcher::DynamicBatcher(BatcherOptions options, BatchBackend* backend,
                               std::shared_ptr<absl::Mutex> compute_slot)
    : options_(options), backend_(backend), compute_slot_(std::move(compute_slot)) {
  scheduler_ = std::thread([this] { SchedulerLoop(); });
}

DynamicBatcher::~DynamicBatcher() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_.SignalAll();
  }
  scheduler_.join();
  absl::MutexLock lock(&mu_);
  for (const std::shared_ptr<Request>& r : queue_) {
    r->queued = false;
    FinishLocked(*r, absl::UnavailableError("the model was unloaded; retry"));
  }
  queue_.clear();
}

absl::StatusOr<std::unique_ptr<DynamicBatcher::Stream>> DynamicBatcher::Submit(GenerationPlan plan,
                                                                               absl::Time deadline,
                                                                               int priority) {
  auto r = std::make_shared<Request>(std::move(plan));
  r->submitted = absl::Now();
  r->deadline = deadline;
  r->priority = std::clamp(priority, 0, std::max(0, options_.priority_levels - 1));
  r->capacity = std::max<int64_t>(int64_t{options_.buffered_chunks} * r->plan.chunk_showers(),
                                  int64_t{2} * options_.max_batch_size);
  r->partial.offset = 0;
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the model is being unloaded; retry");
  if (static_cast<int>(queue_.size()) >= options_.max_queued_requests) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the worker's generation queue for this model is full (", options_.max_queued_requests,
        " requests waiting: --max-queued-requests, or the model's max_queued_requests set by "
        "LoadModel); retry with backoff or ask for more showers per request"));
  }
  queue_.push_back(r);
  ++active_;
  stats_.queued_showers += r->plan.count();
  work_.Signal();
  return std::unique_ptr<Stream>(new Stream(this, std::move(r)));
}

DynamicBatcher::Stats DynamicBatcher::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.active_requests = active_;
  return s;
}

int64_t DynamicBatcher::RoomLocked(const Request& r) const {
  if (!r.status.ok() || r.cancelled) return 0;
  const int64_t left = r.plan.count() - r.next_index;
  const int64_t buffered = r.produced - r.delivered;
  return std::max<int64_t>(0, std::min(left, r.capacity - buffered - r.in_flight));
}

void DynamicBatcher::FinishLocked(Request& r, absl::Status status) {
  if (!r.status.ok()) return;
  r.status = std::move(status);
  // Showers not produced yet will never be (those of a running batch are discarded).
  stats_.queued_showers -= r.plan.count() - r.produced;
  r.next_index = r.plan.count();
  r.ready.clear();
  r.partial = Chunk();
}

void DynamicBatcher::RemoveIfIdleLocked(const std::shared_ptr<Request>& r) {
  if (!r->queued || r->in_flight > 0) return;
  const bool all_scheduled = r->next_index >= r->plan.count();
  if (!all_scheduled && r->status.ok() && !r->cancelled) return;
  r->queued = false;
  queue_.remove(r);
}

absl::Time DynamicBatcher::ExpireLocked(absl::Time now) {
  absl::Time earliest = absl::InfiniteFuture();
  std::vector<std::shared_ptr<Request>> idle;
  for (const std::shared_ptr<Request>& r : queue_) {
    if (!r->status.ok() || r->cancelled) continue;
    if (r->deadline <= now) {
      FinishLocked(*r, absl::DeadlineExceededError(absl::StrCat(
                           "deadline passed with ", r->produced, " of ", r->plan.count(),
                           " showers generated; allow more time or ask for fewer showers")));
      idle.push_back(r);
    } else {
      earliest = std::min(earliest, r->deadline);
    }
  }
  for (const auto& r : idle) RemoveIfIdleLocked(r);
  return earliest;
}

std::vector<DynamicBatcher::Part> DynamicBatcher::TakeBatchLocked() {
  std::vector<std::shared_ptr<Request>> order(queue_.begin(), queue_.end());
  std::vector<int64_t> room(order.size()), take(order.size(), 0);
  int top = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    room[i] = RoomLocked(*order[i]);
    top = std::max(top, order[i]->priority);
  }
  const size_t start = order.empty() ? 0 : round_robin_ % order.size();
  ++round_robin_;
  int64_t filled = 0;
  for (int level = top; level >= 0 && filled < options_.max_batch_size; --level) {
    bool progress = true;
    while (filled < options_.max_batch_size && progress) {
      progress = false;
      for (size_t k = 0; k < order.size() && filled < options_.max_batch_size; ++k) {
        const size_t i = (start + k) % order.size();
        if (order[i]->priority == level && take[i] < room[i]) {
          ++take[i];
          ++filled;
          progress = true;
        }
      }
    }
  }
  std::vector<Part> parts;
  for (size_t i = 0; i < order.size(); ++i) {
    if (take[i] == 0) continue;
    Request& r = *order[i];
    parts.push_back(Part{order[i], r.next_index, take[i]});
    r.next_index += take[i];
    r.in_flight += take[i];
  }
  return parts;
}

void DynamicBatcher::SchedulerLoop() {
  const int64_t cells = backend_->traits().cells_per_shower();
  std::vector<ShowerSpec> specs;
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time now = absl::Now();
    absl::Time wake = ExpireLocked(now);
    int64_t waiting = 0;
    absl::Time oldest = absl::InfiniteFuture();
    for (const std::shared_ptr<Request>& r : queue_) {
      const int64_t room = RoomLocked(*r);
      if (room == 0) continue;
      waiting += room;
      oldest = std::min(oldest, r->submitted);
    }
    const bool run = waiting >= options_.max_batch_size ||
                     (waiting > 0 && now >= oldest + options_.max_queue_delay);
    if (!run) {
      if (waiting > 0) wake = std::min(wake, oldest + options_.max_queue_delay);
      work_.WaitWithDeadline(&mu_, wake);
      continue;
    }
    std::vector<Part> parts = TakeBatchLocked();
    specs.clear();
    for (const Part& p : parts) {
      for (int64_t i = 0; i < p.count; ++i) specs.push_back(p.request->plan.Shower(p.first + i));
    }
    batch_cells_.resize(specs.size() * static_cast<size_t>(cells));
    absl::Status status;
    const ServingMetrics& metrics = GetServingMetrics();
    metrics.queue_delay.Observe({}, absl::ToDoubleSeconds(now - oldest));
    mu_.Unlock();
    {
      if (compute_slot_ != nullptr) compute_slot_->Lock();
      const absl::Time compute_start = absl::Now();
      status = backend_->RunBatch(specs, batch_cells_.data());
      metrics.compute.Observe({}, absl::ToDoubleSeconds(absl::Now() - compute_start));
      if (compute_slot_ != nullptr) compute_slot_->Unlock();
    }
    metrics.batches.Increment({status.ok() ? "ok" : "error"});
    metrics.batch_size.Observe({}, static_cast<double>(specs.size()));
    if (status.ok()) metrics.showers.Increment({}, static_cast<double>(specs.size()));
    mu_.Lock();
    ++stats_.batches;
    stats_.batched_showers += static_cast<int64_t>(specs.size());
    stats_.largest_batch = std::max<int64_t>(stats_.largest_batch, specs.size());
    DeliverLocked(parts, specs, status);
  }
}

void DynamicBatcher::DeliverLocked(const std::vector<Part>& parts,
                                   const std::vector<ShowerSpec>& specs,
                                   const absl::Status& status) {
  const int64_t cells = backend_->traits().cells_per_shower();
  int64_t position = 0;  // shower position in the batch
  for (const Part& p : parts) {
    Request& r = *p.request;
    r.in_flight -= p.count;
    const bool keep = r.status.ok() && !r.cancelled;
    if (keep && !status.ok()) {
      FinishLocked(r, absl::Status(status.code(),
                                   absl::StrCat("generating a batch failed: ", status.message())));
    } else if (keep) {
      stats_.queued_showers -= p.count;
      const float* src = batch_cells_.data() + position * cells;
      const ShowerSpec* spec = specs.data() + position;
      int64_t left = p.count;
      int64_t index = p.first;
      while (left > 0) {
        if (r.partial.count == 0) r.partial.offset = index;
        const int64_t n = std::min<int64_t>(left, r.plan.chunk_showers() - r.partial.count);
        r.partial.cells.insert(r.partial.cells.end(), src, src + n * cells);
        r.partial.showers.insert(r.partial.showers.end(), spec, spec + n);
        r.partial.count += n;
        src += n * cells;
        spec += n;
        index += n;
        left -= n;
        r.produced += n;
        if (r.partial.count == r.plan.chunk_showers() || r.produced == r.plan.count()) {
          r.ready.push_back(std::move(r.partial));
          r.partial = Chunk();
        }
      }
    }
    position += p.count;
    RemoveIfIdleLocked(p.request);
  }
}

DynamicBatcher::Stream::~Stream() {
  absl::MutexLock lock(&batcher_->mu_);
  if (!ended_) {
    request_->cancelled = true;
    batcher_->FinishLocked(*request_, absl::CancelledError("the consumer went away"));
    batcher_->RemoveIfIdleLocked(request_);
    EndLocked();
  }
}

void DynamicBatcher::Stream::EndLocked() {
  if (ended_) return;
  ended_ = true;
  --batcher_->active_;
  batcher_->work_.Signal();
}

int64_t DynamicBatcher::Stream::count() const { return request_->plan.count(); }

void DynamicBatcher::Stream::Cancel() {
  absl::MutexLock lock(&batcher_->mu_);
  if (ended_) return;
  request_->cancelled = true;
  batcher_->FinishLocked(*request_, absl::CancelledError("the request was cancelled"));
  batcher_->RemoveIfIdleLocked(request_);
  EndLocked();
}

absl::StatusOr<DynamicBatcher::Stream::Poll> DynamicBatcher::Stream::Next(absl::Duration wait,
                                                                          Chunk* chunk) {
  Request& r = *request_;
  absl::MutexLock lock(&batcher_->mu_);
  if (ended_ && r.status.ok() && r.delivered == r.plan.count()) return Poll::kDone;
  auto has_news = [&r]() {
    return !r.status.ok() || !r.ready.empty() || r.delivered == r.plan.count();
  };
  const absl::Time until = std::min(absl::Now() + wait, r.deadline);
  batcher_->mu_.AwaitWithDeadline(absl::Condition(&has_news), until);
  if (!r.status.ok()) {
    EndLocked();
    return r.status;
  }
  if (!r.ready.empty()) {
    *chunk = std::move(r.ready.front());
    r.ready.pop_front();
    r.delivered += chunk->count;
    batcher_->work_.Signal();  // room for more of this request
    return Poll::kChunk;
  }
  if (r.delivered == r.plan.count()) {
    EndLocked();
    return Poll::kDone;
  }
  if (absl::Now() >= r.deadline) {
    batcher_->FinishLocked(r, absl::DeadlineExceededError(absl::StrCat(
                                  "deadline passed with ", r.delivered, " of ", r.plan.count(),
                                  " showers delivered; allow more time or ask for fewer showers")));
    batcher_->RemoveIfIdleLocked(request_);
    EndLocked();
    return r.status;
  }
  return Poll::kWaiting;
}

}  // namespace gantry::serving
