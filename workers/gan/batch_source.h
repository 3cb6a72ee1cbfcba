// BatchSource: where the Trainer's real batches come from. The Trainer owns the sample order (its
// epoch permutations come from the shared RNG); a source only turns the planned lists of event
// positions into preprocessed batches, from memory or read ahead from a file.
#ifndef GANTRY_WORKERS_GAN_BATCH_SOURCE_H_
#define GANTRY_WORKERS_GAN_BATCH_SOURCE_H_

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace gantry::gan {

// One batch of preprocessed training events (as TrainingTensors rows).
struct RealBatch {
  at::Tensor images;     // (b, 1, x, y, z)
  at::Tensor energy100;  // (b, 1)
  at::Tensor theta;      // (b, 1) variable angle, else undefined
  at::Tensor ecal;       // (b, 1)
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;

  // Training events after the event selection; the Trainer's permutations range over
  // [0, events()) and a batch is a list of such positions.
  virtual int64_t events() const = 0;
  // The dtype of the batches (float32; float64 when tests converted the tensors).
  virtual at::ScalarType dtype() const = 0;

  // The batches Next() will return from now on, in order: replaces the rest of any previous plan
  // (called by the Trainer at each epoch start with this rank's slices of the epoch permutation).
  // INVALID_ARGUMENT for a position outside [0, events()).
  virtual absl::Status Plan(std::vector<std::vector<int64_t>> batches) = 0;

  // The next planned batch, blocking until it is ready. FAILED_PRECONDITION when the plan is used
  // up; a read error's status otherwise. Called by one thread (the training thread).
  virtual absl::StatusOr<RealBatch> Next() = 0;

 protected:
  // Plan()'s check: INVALID_ARGUMENT for a position outside [0, events()).
  absl::Status CheckPlan(const std::vector<std::vector<int64_t>>& batches) const {
    for (const auto& batch : batches) {
      for (int64_t i : batch) {
        if (i < 0 || i >= events()) {
          return absl::InvalidArgumentError(
              absl::StrCat("batch position ", i, " is outside [0, ", events(), ")"));
        }
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_BATCH_SOURCE_H_
