#include "workers/gan/prefetching_batch_source.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "workers/gan/preprocessing.h"

namespace gantry::gan {

PrefetchingBatchSource::PrefetchingBatchSource(
    const ModelConfig& config, std::shared_ptr<const showers::ShowerFileReader> reader,
    const PrefetchOptions& options)
    : config_(config), reader_(std::move(reader)), options_(options) {}

absl::StatusOr<std::unique_ptr<PrefetchingBatchSource>> PrefetchingBatchSource::Create(
    const ModelConfig& config, std::shared_ptr<const showers::ShowerFileReader> reader,
    std::vector<int64_t> candidates, const PrefetchOptions& options) {
  if (reader == nullptr) return absl::InvalidArgumentError("no shower file reader");
  if (options.queue_depth < 0 || options.loader_threads < 0 ||
      (options.queue_depth > 0 && options.loader_threads < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch queue depth ", options.queue_depth, " with ", options.loader_threads,
                     " loader threads: both must be >= 0, and a queue needs at least one loader"));
  }
  const showers::Layout want = config.variable_angle() ? showers::Layout::kVariableAngle3DGan
                                                       : showers::Layout::kFixedAngle3DGan;
  if (reader->layout() != want || reader->shape() != config.grid) {
    const auto& s = reader->shape();
    return absl::InvalidArgumentError(absl::StrCat(
        reader->path(), ": data grid ", s[0], "x", s[1], "x", s[2], " does not fit model preset \"",
        config.preset, "\" (needs ", config.grid[0], "x", config.grid[1], "x", config.grid[2],
        config.variable_angle() ? ", variable angle" : "", ")"));
  }
  for (int64_t i : candidates) {
    if (i < 0 || i >= reader->events()) {
      return absl::InvalidArgumentError(absl::StrCat(reader->path(), ": training event ", i,
                                                     " is outside [0, ", reader->events(), ")"));
    }
  }
  std::unique_ptr<PrefetchingBatchSource> source(
      new PrefetchingBatchSource(config, reader, options));
  if (config.min_event_sum_gev < 0) {
    // Cells are never negative (the reader checks them): every candidate passes, no pass needed.
    source->events_ = std::move(candidates);
  } else {
    // One sequential pass in blocks of ~16 MiB finds the selected events (and checks every cell
    // now rather than in the middle of an epoch).
    const int64_t per_event = reader->cells_per_event();
    const int64_t block = std::max<int64_t>(
        1, (int64_t{16} << 20) / (per_event * static_cast<int64_t>(sizeof(float))));
    for (size_t first = 0; first < candidates.size(); first += block) {
      const size_t end = std::min(candidates.size(), first + static_cast<size_t>(block));
      const std::vector<int64_t> indices(candidates.begin() + first, candidates.begin() + end);
      ASSIGN_OR_RETURN(showers::ShowerSet set, reader->ReadEvents(indices));
      for (size_t k = 0; k < indices.size(); ++k) {
        if (PassesEventSelection(config, set.event(static_cast<int64_t>(k)), per_event)) {
          source->events_.push_back(indices[k]);
        }
      }
    }
    source->dropped_events_ =
        static_cast<int64_t>(candidates.size()) - static_cast<int64_t>(source->events_.size());
  }
  if (source->events_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader->path(), ": no training event has a cell sum above ",
                     config.min_event_sum_gev, " GeV; nothing to train on"));
  }
  if (options.queue_depth > 0) {
    for (int t = 0; t < options.loader_threads; ++t) {
      source->loaders_.emplace_back([s = source.get()] { s->LoaderLoop(); });
    }
  }
  return source;
}

PrefetchingBatchSource::~PrefetchingBatchSource() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : loaders_) t.join();
}

absl::Status PrefetchingBatchSource::Plan(std::vector<std::vector<int64_t>> batches) {
  if (absl::Status checked = CheckPlan(batches); !checked.ok()) return checked;
  absl::MutexLock lock(&mu_);
  ++generation_;
  plan_ = std::move(batches);
  next_to_load_ = 0;
  next_to_deliver_ = 0;
  ready_.clear();
  return absl::OkStatus();
}

bool PrefetchingBatchSource::CanLoad() const {
  return stopping_ ||
         (next_to_load_ < plan_.size() &&
          next_to_load_ - next_to_deliver_ < static_cast<size_t>(options_.queue_depth));
}

bool PrefetchingBatchSource::NextReady() const { return ready_.count(next_to_deliver_) > 0; }

void PrefetchingBatchSource::LoaderLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(this, &PrefetchingBatchSource::CanLoad));
    if (stopping_) return;
    const size_t index = next_to_load_++;
    const uint64_t generation = generation_;
    const std::vector<int64_t> positions = plan_[index];
    mu_.Unlock();
    if (options_.before_read) options_.before_read();
    absl::StatusOr<RealBatch> batch = Load(positions);
    mu_.Lock();
    if (generation == generation_) ready_.emplace(index, std::move(batch));
  }
}

absl::StatusOr<RealBatch> PrefetchingBatchSource::Next() {
  std::vector<int64_t> positions;
  {
    absl::MutexLock lock(&mu_);
    if (next_to_deliver_ >= plan_.size()) {
      return absl::FailedPreconditionError("no batch planned");
    }
    if (options_.queue_depth > 0) {
      mu_.Await(absl::Condition(this, &PrefetchingBatchSource::NextReady));
      auto node = ready_.extract(next_to_deliver_++);
      return std::move(node.mapped());
    }
    positions = plan_[next_to_deliver_++];
  }
  if (options_.before_read) options_.before_read();
  return Load(positions);
}

absl::StatusOr<RealBatch> PrefetchingBatchSource::Load(
    const std::vector<int64_t>& positions) const {
  std::vector<int64_t> indices(positions.size());
  for (size_t k = 0; k < positions.size(); ++k) indices[k] = events_[positions[k]];
  ASSIGN_OR_RETURN(showers::ShowerSet set, reader_->ReadEvents(indices));
  std::vector<int64_t> rows(indices.size());
  std::iota(rows.begin(), rows.end(), 0);
  TrainingTensors t;
  try {
    t = PreprocessEvents(config_, set, rows);
  } catch (const c10::Error& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("preprocessing a batch: ", e.what_without_backtrace()));
  }
  RealBatch batch;
  batch.images = std::move(t.images);
  batch.energy100 = std::move(t.energy100);
  batch.theta = std::move(t.theta);
  batch.ecal = std::move(t.ecal);
  if (options_.pin_memory) {
    try {
      for (at::Tensor* x : {&batch.images, &batch.energy100, &batch.theta, &batch.ecal}) {
        if (x->defined()) *x = x->pin_memory();
      }
    } catch (const c10::Error& e) {
      return absl::FailedPreconditionError(
          absl::StrCat("pinning a batch: ", e.what_without_backtrace()));
    }
  }
  return batch;
}

}  // namespace gantry::gan
