// GenerationPlan: one validated generation request as the batcher sees it: how many showers, the
// conditions of shower i (listed, or drawn from (seed, i) for ranges), the chunk size. Torch-free.
//
// Angles: fixed-angle models ignore theta (chunks report 0). For variable-angle models a listed
// theta of 0 means the model's default angle, the middle of its training angle range (pi/2 for
// the 60-120 degree range); a range without theta draws theta uniformly from the training range.
// The training ranges are the served model's (ServedModel), else the model config's.
#ifndef GANTRY_WORKERS_SERVING_GENERATION_PLAN_H_
#define GANTRY_WORKERS_SERVING_GENERATION_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gantry/v1/worker.pb.h"
#include "workers/serving/batch_backend.h"

namespace gantry::serving {

class GenerationPlan {
 public:
  static constexpr int kDefaultChunkShowers = 64;
  static constexpr int kMaxChunkShowers = 1024;
  static constexpr int64_t kMaxShowers = int64_t{10} * 1000 * 1000;

  // INVALID_ARGUMENT naming the field for: seed 0, no conditions, counts out of 1..kMaxShowers,
  // non-finite or non-positive energies, energies or angles outside the served model's training
  // ranges (named), chunk_showers out of 0..kMaxChunkShowers. FAILED_PRECONDITION with
  // traits.bf16_unavailable for PRECISION_BF16 when that is set.
  static absl::StatusOr<GenerationPlan> Create(const gantry::v1::WorkerGenerateRequest& request,
                                               const ModelTraits& traits);

  int64_t count() const { return count_; }
  int chunk_showers() const { return chunk_showers_; }
  uint64_t seed() const { return seed_; }
  bool bfloat16() const { return bfloat16_; }
  const std::string& model_ref() const { return model_ref_; }
  // Shower `index` (0 <= index < count()): seed, index and its conditions.
  ShowerSpec Shower(int64_t index) const;

 private:
  class TrainingRanges;

  GenerationPlan() = default;
  // The conditions: a list of showers, or a count with energy (and angle) ranges to draw from.
  absl::Status SetList(const gantry::v1::ConditionList& list, const TrainingRanges& ranges);
  absl::Status SetRange(const gantry::v1::ConditionRange& range, const TrainingRanges& ranges);

  int64_t count_ = 0;
  int chunk_showers_ = kDefaultChunkShowers;
  uint64_t seed_ = 0;
  bool bfloat16_ = false;
  std::string model_ref_;
  bool variable_angle_ = false;
  // Listed conditions (empty for a range).
  std::vector<float> energies_;
  std::vector<float> thetas_;
  // Range bounds (when energies_ is empty).
  double energy_min_ = 0, energy_max_ = 0, theta_min_ = 0, theta_max_ = 0;
};

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_GENERATION_PLAN_H_
