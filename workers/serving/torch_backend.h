// TorchBackend: the BatchBackend of a trained 3DGAN generator (gan::ShowerGenerator, LibTorch):
// each shower's latent noise comes from CounterRng(seed, index), so a shower does not depend on
// the batch it runs in. With LibTorch 1.13's CPU kernels a shower's cells are bit-identical in
// every batch of 2..128 at any position; ShowerGenerator::GenerateFromNoise runs a lone shower as a
// pair for the same reason (tested in tests/serving; a different CPU or thread count may round
// differently). Showers marked bfloat16 run in bfloat16 when gan::Bf16Support() allows it (traits
// say why not otherwise).
#ifndef GANTRY_WORKERS_SERVING_TORCH_BACKEND_H_
#define GANTRY_WORKERS_SERVING_TORCH_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "workers/gan/shower_generator.h"
#include "workers/serving/batch_backend.h"

namespace gantry::serving {

class TorchBackend final : public BatchBackend {
 public:
  // Loads the generator of a checkpoint file (errors as gan::ReadCheckpoint).
  static absl::StatusOr<std::unique_ptr<TorchBackend>> FromCheckpoint(
      const std::string& path, const c10::Device& device = c10::Device(c10::kCPU));
  explicit TorchBackend(std::unique_ptr<gan::ShowerGenerator> generator);

  absl::Status RunBatch(const std::vector<ShowerSpec>& showers, float* out) override;
  const ModelTraits& traits() const override { return traits_; }
  int64_t memory_bytes() const override { return memory_bytes_; }

 private:
  // Runs showers[members] (all of one precision) into `out`, in the order of `members`.
  absl::Status RunGroup(const std::vector<ShowerSpec>& showers, const std::vector<size_t>& members,
                        bool bfloat16, float* out);

  std::unique_ptr<gan::ShowerGenerator> generator_;
  ModelTraits traits_;
  int64_t memory_bytes_ = 0;
  std::vector<float> energies_, thetas_, noise_, group_out_;  // reused between batches
};

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_TORCH_BACKEND_H_
