// ModelCache: the models a worker keeps loaded for generation, keyed by checkpoint sha256 and
// bounded by memory: when a newly loaded model does not fit, the least recently used models that
// serve no request and are not pinned are unloaded (the generator destroyed and the heap trimmed,
// so the memory goes back to the system). Concurrent requests for a model being loaded wait for
// that one load. Pin (AdminService.LoadModel) loads a model with its own batching settings, warms
// it up and keeps it until Unpin.
// Thread-safe. Torch-free: models are built by an injected loader.
#ifndef GANTRY_WORKERS_SERVING_MODEL_CACHE_H_
#define GANTRY_WORKERS_SERVING_MODEL_CACHE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gantry/v1/worker.pb.h"
#include "workers/serving/batch_backend.h"
#include "workers/serving/servable_model.h"

namespace gantry::serving {

// Builds the backend of a served model (fetch the checkpoint if needed, load the generator).
// Called without locks held, at most once at a time per checkpoint.
using ModelLoader = std::function<absl::StatusOr<std::unique_ptr<BatchBackend>>(
    const gantry::v1::ServedModel& model)>;

struct ModelCacheOptions {
  int64_t max_bytes = int64_t{1} << 30;  // sum of loaded models' memory_bytes
  BatcherOptions batcher;
};

class ModelCache {
 private:
  struct Entry;

 public:
  // Keeps a model loaded (never unloaded) while it exists. Move-only.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { Release(); }
    ServableModel* operator->() const { return model_.get(); }
    ServableModel& operator*() const { return *model_; }
    void Release();

   private:
    friend class ModelCache;
    ModelCache* cache_ = nullptr;
    std::shared_ptr<Entry> entry_;
    std::shared_ptr<ServableModel> model_;
  };

  struct LoadedModel {
    std::string checkpoint_sha256;
    int64_t memory_bytes = 0;
    int users = 0;  // leases held
    bool pinned = false;
    BatcherOptions batcher;
    DynamicBatcher::Stats stats;
  };

  // What Pin did.
  struct PinResult {
    int64_t memory_bytes = 0;
    absl::Duration load_time;    // zero when it was loaded already
    absl::Duration warmup_time;  // the warm-up batch
    BatcherOptions batcher;      // in effect
  };
  // What Unpin did.
  struct UnpinResult {
    bool was_loaded = false;
    bool unloaded = false;  // false while leases hold it: it goes with the last one
  };

  // `compute_slot` is shared by every model's batcher (one batch at a time on this worker).
  ModelCache(ModelCacheOptions options, ModelLoader loader,
             std::shared_ptr<absl::Mutex> compute_slot);
  // Every Lease must be released first.
  ~ModelCache();
  ModelCache(const ModelCache&) = delete;
  ModelCache& operator=(const ModelCache&) = delete;

  // The model, loading it first if needed. Errors: the loader's; RESOURCE_EXHAUSTED when it does
  // not fit next to the models serving requests now (or alone in the budget), naming the sizes.
  absl::StatusOr<Lease> Acquire(const gantry::v1::ServedModel& model);

  // Loads the model if needed (its batcher built with `batcher`), pins it (never evicted) and
  // runs a warm-up batch of one shower through its batcher. On a model loaded already, settings
  // that differ give it a new batcher (the generator is shared: requests queued in the old one
  // finish there). Errors: Acquire's; the warm-up batch's (the model is then unpinned again).
  absl::StatusOr<PinResult> Pin(const gantry::v1::ServedModel& model,
                                const BatcherOptions& batcher);
  // Unpins the model and unloads it now when no lease holds it, else when the last is released.
  UnpinResult Unpin(const std::string& checkpoint_sha256);

  // The batcher settings of models loaded by Acquire (the daemon's flags).
  const BatcherOptions& default_batcher() const { return options_.batcher; }
  // Loaded models, most recently used first.
  std::vector<LoadedModel> Snapshot() const;
  int64_t loaded_bytes() const;
  // Models loaded / unloaded so far.
  int64_t loads() const;
  int64_t unloads() const;

 private:
  // Acquire, building a newly loaded model's batcher with `batcher`.
  // `loaded_now` (may be null): set when this call loaded it.
  absl::StatusOr<Lease> AcquireWith(const gantry::v1::ServedModel& model,
                                    const BatcherOptions& batcher, bool* loaded_now);
  void ReleaseEntry(const std::shared_ptr<Entry>& entry);
  // Takes `entry` out of the cache; returns its model for destruction outside the lock.
  std::shared_ptr<ServableModel> RemoveLocked(const std::shared_ptr<Entry>& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes least recently used idle models out until the total fits; returns them for destruction
  // outside the lock.
  std::vector<std::shared_ptr<ServableModel>> EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Destroys unloaded models and gives freed heap pages back to the system.
  static void Destroy(std::vector<std::shared_ptr<ServableModel>> models);

  const ModelCacheOptions options_;
  const ModelLoader loader_;
  const std::shared_ptr<absl::Mutex> compute_slot_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  int64_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t loads_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t unloads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_MODEL_CACHE_H_
