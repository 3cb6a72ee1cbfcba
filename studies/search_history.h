// What every Optimizer does with Suggest's arguments before searching: checks them, derives the
// call's random stream, and reads the history in unit-cube coordinates.
#ifndef GANTRY_STUDIES_SEARCH_HISTORY_H_
#define GANTRY_STUDIES_SEARCH_HISTORY_H_

#include <cstdint>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "studies/search_space.h"
#include "studies/study_types.h"
#include "studies/unit_cube.h"

namespace gantry::studies {

// INVALID_ARGUMENT when the space does not validate, count < 1 (or above kMaxSuggestions), or an
// observation or pending assignment does not fit the space (naming which one).
absl::Status CheckSuggestArguments(const SearchSpace& space,
                                   absl::Span<const Observation> completed,
                                   absl::Span<const Assignment> pending, int count);
inline constexpr int kMaxSuggestions = 1000;

// The seed of one Suggest call: the study's seed mixed with the history's size.
uint64_t SuggestSeed(uint64_t seed, size_t completed, size_t pending);

// The objectives with every non-finite one replaced by the worst finite one (0 when none is).
std::vector<double> FiniteObjectives(absl::Span<const Observation> completed);

// The cube points of the completed and pending assignments, in that order.
std::vector<Eigen::VectorXd> EncodeHistory(const UnitCube& cube,
                                           absl::Span<const Observation> completed,
                                           absl::Span<const Assignment> pending);

// Whether `point` equals one of `points` (to 1e-12 per coordinate).
bool ContainsPoint(const std::vector<Eigen::VectorXd>& points, const Eigen::VectorXd& point);

}  // namespace gantry::studies

#endif  // GANTRY_STUDIES_SEARCH_HISTORY_H_
