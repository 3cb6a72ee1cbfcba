#include "workers/serving/model_cache.h"

#include <malloc.h>

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "workers/runner/dataset_cache.h"

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
};

ModelCache::Lease& ModelCache::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    cache_ = other.cache_;
    entry_ = std::move(other.entry_);
    model_ = other.model_;
    other.cache_ = nullptr;
    other.model_ = nullptr;
  }
  return *this;
}

void ModelCache::Lease::Release() {
  if (cache_ != nullptr && entry_ != nullptr) cache_->ReleaseEntry(entry_);
  cache_ = nullptr;
  entry_.reset();
  model_ = nullptr;
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
      lease.model_ = entry->model.get();
      return lease;
    }
  }

  const absl::Time load_start = absl::Now();
  absl::StatusOr<std::unique_ptr<BatchBackend>> backend = loader_(model);
  std::shared_ptr<ServableModel> loaded;
  absl::Status error;
  if (backend.ok()) {
    loaded = std::make_shared<ServableModel>(*std::move(backend), options_.batcher, compute_slot_);
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
  Lease lease;
  lease.cache_ = this;
  lease.entry_ = entry;
  lease.model_ = entry->model.get();
  return lease;
}

std::vector<std::shared_ptr<ServableModel>> ModelCache::EvictLocked() {
  std::vector<std::shared_ptr<ServableModel>> victims;
  while (total_bytes_ > options_.max_bytes) {
    std::shared_ptr<Entry> lru;
    for (auto& [sha, e] : entries_) {
      if (e->state != Entry::State::kReady || e->users > 0) continue;
      if (lru == nullptr || e->last_used < lru->last_used) lru = e;
    }
    if (lru == nullptr) break;
    total_bytes_ -= lru->bytes;
    victims.push_back(std::move(lru->model));
    entries_.erase(lru->sha256);
    ++unloads_;
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
