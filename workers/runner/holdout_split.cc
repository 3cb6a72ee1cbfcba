#include "workers/runner/holdout_split.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"

namespace gantry::runner {

namespace {

// 0..events-1 in the order of a Fisher-Yates shuffle driven by std::mt19937_64(seed), with an
// explicit modulo-free draw (uniform via rejection), so every platform gives the same order.
std::vector<int64_t> SeededPermutation(int64_t events, uint64_t seed) {
  std::vector<int64_t> order(events);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  for (int64_t i = events - 1; i > 0; --i) {
    const uint64_t bound = static_cast<uint64_t>(i) + 1;
    const uint64_t limit =
        std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
    uint64_t draw;
    do {
      draw = rng();
    } while (draw >= limit);
    std::swap(order[i], order[draw % bound]);
  }
  return order;
}

}  // namespace

absl::StatusOr<HoldoutSplit> SplitFolds(int64_t events, int folds, int validation_fold,
                                        uint64_t seed) {
  if (folds < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.data_split.folds: is ", folds, "; K-fold needs at least 2 folds"));
  }
  if (validation_fold < 0 || validation_fold >= folds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.data_split.validation_fold: is ", validation_fold, "; it must be in 0..", folds - 1));
  }
  if (events < folds) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.data_split.folds: is ", folds, " but the dataset has only ", events,
                     " events; every fold needs at least one, so use at most ", events, " folds"));
  }
  const std::vector<int64_t> order = SeededPermutation(events, seed);
  const int64_t begin = validation_fold * events / folds;
  const int64_t end = (validation_fold + 1) * events / folds;
  HoldoutSplit split;
  split.holdout.assign(order.begin() + begin, order.begin() + end);
  split.train.assign(order.begin(), order.begin() + begin);
  split.train.insert(split.train.end(), order.begin() + end, order.end());
  std::sort(split.train.begin(), split.train.end());
  return split;
}

absl::StatusOr<HoldoutSplit> SplitHoldout(int64_t events, double fraction, uint64_t seed) {
  if (!(fraction >= 0.0 && fraction < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("validation.holdout_fraction: is ", fraction, "; it must be in [0, 1)"));
  }
  if (events < 0) return absl::InvalidArgumentError("negative event count");
  const int64_t held = static_cast<int64_t>(std::llround(fraction * static_cast<double>(events)));
  if (events - held < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("holding out ", held, " of ", events, " events leaves none to train on"));
  }
  const std::vector<int64_t> order = SeededPermutation(events, seed);
  HoldoutSplit split;
  split.holdout.assign(order.begin(), order.begin() + held);
  split.train.assign(order.begin() + held, order.end());
  std::sort(split.train.begin(), split.train.end());
  return split;
}

showers::ShowerSet SelectEvents(const showers::ShowerSet& set,
                                const std::vector<int64_t>& indices) {
  showers::ShowerSet out;
  out.layout = set.layout;
  out.shape = set.shape;
  out.particle = set.particle;
  const int64_t cells = set.cells_per_event();
  out.cells.resize(indices.size() * cells);
  out.energy_gev.reserve(indices.size());
  if (!set.theta_rad.empty()) out.theta_rad.reserve(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    std::memcpy(out.cells.data() + k * cells, set.event(i), cells * sizeof(float));
    out.energy_gev.push_back(set.energy_gev[i]);
    if (!set.theta_rad.empty()) out.theta_rad.push_back(set.theta_rad[i]);
  }
  return out;
}

}  // namespace gantry::runner
