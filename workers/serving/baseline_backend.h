// BaselineBackend: the BatchBackend of a no-network baseline (workers/baseline): each shower is
// BaselineSampler::Draw(energy, seed, index), so it does not depend on the batch it runs in.
// Fixed-angle only; float32 only (a bfloat16 request is refused as for a worker without bfloat16).
// Torch-free.
#ifndef GANTRY_WORKERS_SERVING_BASELINE_BACKEND_H_
#define GANTRY_WORKERS_SERVING_BASELINE_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "workers/baseline/baseline_sampler.h"
#include "workers/serving/batch_backend.h"

namespace gantry::serving {

class BaselineBackend final : public BatchBackend {
 public:
  // Reads a baseline checkpoint (errors as baseline::ReadBaselineCheckpoint).
  static absl::StatusOr<std::unique_ptr<BaselineBackend>> FromCheckpoint(const std::string& path);
  explicit BaselineBackend(baseline::BaselineSampler sampler);

  absl::Status RunBatch(const std::vector<ShowerSpec>& showers, float* out) override;
  const ModelTraits& traits() const override { return traits_; }
  int64_t memory_bytes() const override { return memory_bytes_; }

 private:
  const baseline::BaselineSampler sampler_;
  ModelTraits traits_;
  int64_t memory_bytes_ = 0;
};

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_BASELINE_BACKEND_H_
