// HoldoutSplit: the seeded division of a data set into training events and held-out validation
// events, identical on every rank of a job (it depends only on the event count, the fraction and
// the seed). Torch-free.
#ifndef GANTRY_WORKERS_RUNNER_HOLDOUT_SPLIT_H_
#define GANTRY_WORKERS_RUNNER_HOLDOUT_SPLIT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "showers/shower_set.h"

namespace gantry::runner {

struct HoldoutSplit {
  std::vector<int64_t> train;    // ascending event indices
  std::vector<int64_t> holdout;  // in permutation order (a random order, fixed by the seed)
};

// round(fraction * events) events are held out, chosen by a Fisher-Yates permutation driven by a
// std::mt19937_64 seeded with `seed` (portable: no library shuffle). fraction 0 holds out none.
// INVALID_ARGUMENT when fraction is outside [0, 1) or nothing would be left to train on.
absl::StatusOr<HoldoutSplit> SplitHoldout(int64_t events, double fraction, uint64_t seed);

// K-fold cross-validation: the same seeded permutation cut into `folds` contiguous pieces, fold k
// being permutation positions [k*events/folds, (k+1)*events/folds). The folds are disjoint, cover
// every event and differ in size by at most one. `holdout` is fold `validation_fold`, `train` the
// other folds (ascending). INVALID_ARGUMENT naming spec.data_split when folds < 2, validation_fold
// is outside 0..folds-1, or folds exceeds the event count (a fold would be empty).
absl::StatusOr<HoldoutSplit> SplitFolds(int64_t events, int folds, int validation_fold,
                                        uint64_t seed);

// The events `indices` of `set`, in that order (cells, energies, angles; same layout and shape).
showers::ShowerSet SelectEvents(const showers::ShowerSet& set, const std::vector<int64_t>& indices);

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_HOLDOUT_SPLIT_H_
