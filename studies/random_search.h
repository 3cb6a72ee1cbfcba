// RandomSearch draws every suggestion uniformly from the space (log-uniformly on log axes,
// uniformly among integers and choices), independent of the history but for the random stream.
#ifndef GANTRY_STUDIES_RANDOM_SEARCH_H_
#define GANTRY_STUDIES_RANDOM_SEARCH_H_

#include "studies/optimizer.h"

namespace gantry::studies {

class RandomSearch : public Optimizer {
 public:
  Algorithm algorithm() const override { return Algorithm::kRandom; }
  absl::StatusOr<std::vector<Assignment>> Suggest(const SearchSpace& space,
                                                  absl::Span<const Observation> completed,
                                                  absl::Span<const Assignment> pending, int count,
                                                  uint64_t seed) const override;
};

}  // namespace gantry::studies

#endif  // GANTRY_STUDIES_RANDOM_SEARCH_H_
