// ServableModel: one model loaded for serving: its backend (the generator) and the dynamic batcher
// in front of it. Destroying it stops the batcher, then frees the generator (unless another
// ServableModel, built with other batching settings, still shares it).
#ifndef GANTRY_WORKERS_SERVING_SERVABLE_MODEL_H_
#define GANTRY_WORKERS_SERVING_SERVABLE_MODEL_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "workers/serving/batch_backend.h"
#include "workers/serving/dynamic_batcher.h"

namespace gantry::serving {

class ServableModel {
 public:
  ServableModel(std::shared_ptr<BatchBackend> backend, const BatcherOptions& options,
                std::shared_ptr<absl::Mutex> compute_slot)
      : backend_(std::move(backend)),
        batcher_(
            std::make_unique<DynamicBatcher>(options, backend_.get(), std::move(compute_slot))) {}
  ~ServableModel() { batcher_.reset(); }  // the batcher's thread uses the backend

  DynamicBatcher& batcher() { return *batcher_; }
  const DynamicBatcher& batcher() const { return *batcher_; }
  const ModelTraits& traits() const { return backend_->traits(); }
  int64_t memory_bytes() const { return backend_->memory_bytes(); }
  // The generator, to serve it again behind a batcher with other settings.
  const std::shared_ptr<BatchBackend>& backend() const { return backend_; }

 private:
  std::shared_ptr<BatchBackend> backend_;
  std::unique_ptr<DynamicBatcher> batcher_;
};

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_SERVABLE_MODEL_H_
