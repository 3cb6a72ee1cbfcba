// CheckpointDiff: tensor-by-tensor comparison of two training states (both networks' parameters
// and buffers, and optionally both optimisers' state), for resume checks and
// `gantry-worker checkpoint-diff`.
#ifndef GANTRY_WORKERS_GAN_CHECKPOINT_DIFF_H_
#define GANTRY_WORKERS_GAN_CHECKPOINT_DIFF_H_

#include <string>
#include <vector>

#include "workers/gan/checkpoint.h"

namespace gantry::gan {

// One tensor present in either state, named "generator.<param>", "discriminator.<buffer>",
// "generator_optimizer.<param>.square_avg", ...
struct TensorDifference {
  std::string name;
  double max_abs_difference = 0;  // 0 when identical; +inf when the shapes or dtypes differ
  bool identical = false;         // bit for bit (NaNs in the same places count as equal)
  std::string problem;  // "missing in B", "shape [2, 3] vs [3, 2]", ... ("" if comparable)
};

// Every parameter and buffer of both networks, by name (then, with `optimizers`, every
// per-parameter RMSprop state: step, square_avg, momentum_buffer, grad_avg, in parameter order), in
// a stable order. Both states must have their networks; optimisers are skipped where absent.
std::vector<TensorDifference> CompareTrainingStates(const TrainingState& a, const TrainingState& b,
                                                    bool optimizers);

// True when every entry is identical.
bool AllIdentical(const std::vector<TensorDifference>& differences);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_CHECKPOINT_DIFF_H_
