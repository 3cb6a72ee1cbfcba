// GridSearch enumerates a grid over the space in a fixed order (the last parameter varies
// fastest) and suggests the first points no completed or pending trial holds. Continuous axes
// take grid_points_per_axis evenly spaced values (log axes evenly in log), ends included; an
// integer axis all its integers if there are at most that many, else that many rounded ones;
// a categorical axis all its choices.
#ifndef GANTRY_STUDIES_GRID_SEARCH_H_
#define GANTRY_STUDIES_GRID_SEARCH_H_

#include <vector>

#include "studies/optimizer.h"

namespace gantry::studies {

class GridSearch : public Optimizer {
 public:
  explicit GridSearch(int points_per_axis) : points_per_axis_(points_per_axis) {}

  Algorithm algorithm() const override { return Algorithm::kGrid; }
  absl::StatusOr<std::vector<Assignment>> Suggest(const SearchSpace& space,
                                                  absl::Span<const Observation> completed,
                                                  absl::Span<const Assignment> pending, int count,
                                                  uint64_t seed) const override;
  absl::Status CheckBudget(const SearchSpace& space, int64_t max_trials) const override;

  // The values of each axis, in enumeration order. Assumes a valid space.
  std::vector<std::vector<ParameterValue>> Axes(const SearchSpace& space) const;
  // The number of grid points, saturated at INT64_MAX.
  int64_t PointCount(const SearchSpace& space) const;

 private:
  int points_per_axis_;
};

}  // namespace gantry::studies

#endif  // GANTRY_STUDIES_GRID_SEARCH_H_
