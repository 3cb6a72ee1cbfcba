#include "studies/random_search.h"

#include "studies/random_source.h"
#include "studies/search_history.h"
#include "studies/unit_cube.h"

namespace gantry::studies {

absl::StatusOr<std::vector<Assignment>> RandomSearch::Suggest(
    const SearchSpace& space, absl::Span<const Observation> completed,
    absl::Span<const Assignment> pending, int count, uint64_t seed) const {
  if (absl::Status status = CheckSuggestArguments(space, completed, pending, count); !status.ok()) {
    return status;
  }
  RandomSource random(SuggestSeed(seed, completed.size(), pending.size()));
  const UnitCube cube(space);
  std::vector<Assignment> suggestions;
  suggestions.reserve(count);
  for (int i = 0; i < count; ++i) suggestions.push_back(cube.Decode(cube.Sample(random)));
  return suggestions;
}

}  // namespace gantry::studies
