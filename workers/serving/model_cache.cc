#include "workers/serving/model_cache.h"

#include <malloc.h>

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "workers/runner/dataset_cache.h"
#include "workers/serving/generation_plan.h"

namespace gantry::serving {

struct ModelCache::Entry {
  enum class State { kLoading, kReady, kFailed };
  std::string sha256;
  State state = State::kLoading;
  absl::Status error;                    // with kFailed
  std::shared_ptr<ServableModel> model;  // with kReady
  int64_t bytes = 0;
  int users = 0;
  absl::Time last_used;
  bool pinned = false;            // never evicted
  bool unload_when_idle = false;  // unpinned while leased: unload with the last lease
};

ModelCache::Lease& ModelCache::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    cache_ = other.cache_;
    entry_ = std::move(other.entry_);
    model_ = std::move(other.model_);
    other.cache_ = nullptr;
    other.model_.reset();
  }
  return *this;
}

void ModelCache::Lease::Release() {
  if (cache_ != nullptr && entry_ != nullptr) cache_->ReleaseEntry(entry_);
  cache_ = nullptr;
  entry_.reset();
  model_.reset();
}

ModelCache::ModelCache(ModelCacheOptions options, ModelLoader loader,
                       std::shared_ptr<absl::Mutex> compute_slot)
    : options_(std::move(options)),
      loader_(std::move(loader)),
      compute_slot_(std::move(compute_slot)) {}

ModelCache::~ModelCache() {
  std::vector<std::shared_ptr<ServableModel>> models;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [sha, entry] : entries_) {
      if (entry->model != nullptr) models.push_back(std::move(entry->model));
    }
    entries_.clear();
  }
  Destroy(std::move(models));
}

void ModelCache::Destroy(std::vector<std::shared_ptr<ServableModel>> models) {
  if (models.empty()) return;
  models.clear();
  malloc_trim(0);
}

absl::StatusOr<ModelCache::Lease> ModelCache::Acquire(const gantry::v1::ServedModel& model) {
  return AcquireWith(model, options_.batcher, nullptr);
}

absl::StatusOr<ModelCache::Lease> ModelCache::AcquireWith(const gantry::v1::ServedModel& model,
                                                          const BatcherOptions& batcher,
                                                          bool* loaded_now) {
  if (loaded_now != nullptr) *loaded_now = false;
  const std::string& sha = model.checkpoint_sha256();
  if (!runner::IsSha256Hex(sha)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.checkpoint_sha256: \"", sha, "\" is not a sha256 (64 lower-case hex digits)"));
  }
  std::shared_ptr<Entry> entry;
  bool load = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(sha);
    if (it == entries_.end()) {
      entry = std::make_shared<Entry>();
      entry->sha256 = sha;
      entries_[sha] = entry;
      load = true;
    } else {
      entry = it->second;
    }
    ++entry->users;  // pinned: never evicted while loading or leased
    if (!load) {
      mu_.Await(absl::Condition(
          +[](Entry* e) { return e->state != Entry::State::kLoading; }, entry.get()));
      if (entry->state == Entry::State::kFailed) {
        --entry->users;
        return entry->error;
      }
      entry->last_used = absl::Now();
      Lease lease;
      lease.cache_ = this;
      lease.entry_ = entry;
      lease.model_ = entry->model;
      return lease;
    }
  }

  const absl::Time load_start = absl::Now();
  absl::StatusOr<std::unique_ptr<BatchBackend>> backend = loader_(model);
  std::shared_ptr<ServableModel> loaded;
  absl::Status error;
  if (backend.ok()) {
    loaded = std::make_shared<ServableModel>(std::shared_ptr<BatchBackend>(*std::move(backend)),
                                             batcher, compute_slot_);
  } else {
    error = backend.status();
  }
  std::vector<std::shared_ptr<ServableModel>> victims;
  {
    absl::MutexLock lock(&mu_);
    if (loaded != nullptr) {
      const int64_t bytes = loaded->memory_bytes();
      total_bytes_ += bytes;
      victims = EvictLocked();
      if (total_bytes_ > options_.max_bytes) {
        // It does not fit even after unloading every idle model.
        total_bytes_ -= bytes;
        error = absl::ResourceExhaustedError(
            entries_.size() == 1
                ? absl::StrCat("model ", sha, " needs ", bytes,
                               " bytes, more than the worker's model cache (--model-cache-bytes=",
                               options_.max_bytes, ")")
                : absl::StrCat("model ", sha, " needs ", bytes,
                               " bytes; the worker's model cache (", options_.max_bytes,
                               " bytes) is taken by models serving requests ", "now (",
                               total_bytes_, " bytes); retry later"));
        victims.push_back(std::move(loaded));
      } else {
        entry->bytes = bytes;
        entry->model = std::move(loaded);
        entry->state = Entry::State::kReady;
        entry->last_used = absl::Now();
        ++loads_;
        GANTRY_LOG(INFO) << "loaded model " << sha.substr(0, 12) << " (" << model.model_ref()
                         << ", " << bytes << " bytes) in "
                         << absl::ToDoubleSeconds(absl::Now() - load_start) << " s; model cache "
                         << total_bytes_ << " of " << options_.max_bytes << " bytes";
      }
    }
    if (!error.ok()) {
      entry->state = Entry::State::kFailed;
      entry->error = error;
      --entry->users;
      entries_.erase(sha);
    }
  }
  Destroy(std::move(victims));
  if (!error.ok()) return error;
  if (loaded_now != nullptr) *loaded_now = true;
  Lease lease;
  lease.cache_ = this;
  lease.entry_ = entry;
  absl::MutexLock lock(&mu_);
  lease.model_ = entry->model;
  return lease;
}

absl::StatusOr<ModelCache::PinResult> ModelCache::Pin(const gantry::v1::ServedModel& model,
                                                      const BatcherOptions& batcher) {
  const absl::Time start = absl::Now();
  bool loaded_now = false;
  absl::StatusOr<Lease> lease = AcquireWith(model, batcher, &loaded_now);
  if (!lease.ok()) return lease.status();
  PinResult result;
  if (loaded_now) result.load_time = absl::Now() - start;
  std::shared_ptr<ServableModel> served;
  {
    absl::MutexLock lock(&mu_);
    Entry& e = *lease->entry_;
    if (e.model->batcher().options() != batcher) {
      // A new batcher on the same generator; the old one lives on while leases hold it.
      e.model = std::make_shared<ServableModel>(e.model->backend(), batcher, compute_slot_);
    }
    e.pinned = true;
    e.unload_when_idle = false;
    served = e.model;
    result.memory_bytes = e.bytes;
  }
  result.batcher = served->batcher().options();

  // The warm-up: one shower in the middle of the training energy range, through the batcher, so
  // the first real batch does not pay the one-time kernel and allocator setup.
  const absl::Time warm_start = absl::Now();
  gantry::v1::WorkerGenerateRequest warm;
  *warm.mutable_model() = model;
  const gantry::v1::Range& energy = model.energy_range_gev();
  warm.mutable_request()->mutable_list()->add_items()->set_energy_gev(
      energy.max() > 0 ? 0.5 * (energy.min() + energy.max()) : 100.0);
  warm.mutable_request()->set_seed(1);
  absl::StatusOr<GenerationPlan> plan = GenerationPlan::Create(warm, served->traits());
  if (!plan.ok()) {
    Unpin(model.checkpoint_sha256());
    return plan.status();
  }
  absl::StatusOr<std::unique_ptr<DynamicBatcher::Stream>> stream = served->batcher().Submit(
      *std::move(plan), absl::Now() + absl::Minutes(5), batcher.priority_levels - 1);
  if (!stream.ok()) {
    Unpin(model.checkpoint_sha256());
    return stream.status();
  }
  DynamicBatcher::Chunk chunk;
  while (true) {
    absl::StatusOr<DynamicBatcher::Stream::Poll> poll = (*stream)->Next(absl::Seconds(1), &chunk);
    if (!poll.ok()) {
      stream->reset();
      Unpin(model.checkpoint_sha256());
      return absl::Status(poll.status().code(),
                          absl::StrCat("the warm-up batch failed: ", poll.status().message()));
    }
    if (*poll == DynamicBatcher::Stream::Poll::kDone) break;
  }
  result.warmup_time = absl::Now() - warm_start;
  GANTRY_LOG(INFO) << "pinned model " << model.checkpoint_sha256().substr(0, 12) << " ("
                   << model.model_ref() << ", max batch " << result.batcher.max_batch_size
                   << ", queue " << result.batcher.max_queued_requests << ", "
                   << result.batcher.priority_levels << " priority levels), warm-up "
                   << absl::ToDoubleSeconds(result.warmup_time) << " s";
  return result;
}

ModelCache::UnpinResult ModelCache::Unpin(const std::string& checkpoint_sha256) {
  UnpinResult result;
  std::vector<std::shared_ptr<ServableModel>> victims;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(checkpoint_sha256);
    if (it == entries_.end() || it->second->state != Entry::State::kReady) return result;
    std::shared_ptr<Entry> entry = it->second;
    result.was_loaded = true;
    entry->pinned = false;
    if (entry->users == 0) {
      victims.push_back(RemoveLocked(entry));
      result.unloaded = true;
    } else {
      entry->unload_when_idle = true;
    }
  }
  if (result.unloaded) {
    GANTRY_LOG(INFO) << "unloaded model " << checkpoint_sha256.substr(0, 12) << " (UnloadModel)";
  }
  Destroy(std::move(victims));
  return result;
}

std::shared_ptr<ServableModel> ModelCache::RemoveLocked(const std::shared_ptr<Entry>& entry) {
  total_bytes_ -= entry->bytes;
  std::shared_ptr<ServableModel> model = std::move(entry->model);
  entries_.erase(entry->sha256);
  ++unloads_;
  return model;
}

std::vector<std::shared_ptr<ServableModel>> ModelCache::EvictLocked() {
  std::vector<std::shared_ptr<ServableModel>> victims;
  while (total_bytes_ > options_.max_bytes) {
    std::shared_ptr<Entry> lru;
    for (auto& [sha, e] : entries_) {
      if (e->state != Entry::State::kReady || e->users > 0 || e->pinned) continue;
      if (lru == nullptr || e->last_used < lru->last_used) lru = e;
    }
    if (lru == nullptr) break;
    victims.push_back(RemoveLocked(lru));
    GANTRY_LOG(INFO) << "unloaded model " << lru->sha256.substr(0, 12)
                     << " (least recently used) to fit the model cache";
  }
  return victims;
}

void ModelCache::ReleaseEntry(const std::shared_ptr<Entry>& entry) {
  std::vector<std::shared_ptr<ServableModel>> victims;
  {
    absl::MutexLock lock(&mu_);
    --entry->users;
    entry->last_used = absl::Now();
    victims = EvictLocked();
    auto it = entries_.find(entry->sha256);
    if (entry->unload_when_idle && entry->users == 0 && it != entries_.end() &&
        it->second == entry) {
      victims.push_back(RemoveLocked(entry));
    }
  }
  Destroy(std::move(victims));
}

std::vector<ModelCache::LoadedModel> ModelCache::Snapshot() const {
  std::vector<std::pair<absl::Time, LoadedModel>> models;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [sha, e] : entries_) {
      if (e->state != Entry::State::kReady) continue;
      LoadedModel m;
      m.checkpoint_sha256 = sha;
      m.memory_bytes = e->bytes;
      m.users = e->users;
      m.pinned = e->pinned;
      m.batcher = e->model->batcher().options();
      m.stats = e->model->batcher().stats();
      models.emplace_back(e->last_used, std::move(m));
    }
  }
  std::sort(models.begin(), models.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<LoadedModel> out;
  for (auto& m : models) out.push_back(std::move(m.second));
  return out;
}

int64_t ModelCache::loaded_bytes() const {
  absl::MutexLock lock(&mu_);
  return total_bytes_;
}

int64_t ModelCache::loads() const {
  absl::MutexLock lock(&mu_);
  return loads_;
}

int64_t ModelCache::unloads() const {
  absl::MutexLock lock(&mu_);
  return unloads_;
}

}  // namespace gantry::serving
