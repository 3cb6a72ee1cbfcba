// EvolutionarySearch is the seed's evolutionary algorithm, made stateless: the first
// population_size trials are random; every later suggestion is a child of two distinct parents
// drawn from the fittest fit_fraction of the population, where the population is the best
// population_size completed observations so far (elitist, steady state). A child is a random
// linear interpolation of its parents in the unit cube plus Gaussian mutation, clipped into the
// cube and decoded (integers and categories valid).
#ifndef GANTRY_STUDIES_EVOLUTIONARY_SEARCH_H_
#define GANTRY_STUDIES_EVOLUTIONARY_SEARCH_H_

#include "studies/optimizer.h"

namespace gantry::studies {

class EvolutionarySearch : public Optimizer {
 public:
  explicit EvolutionarySearch(const OptimizerOptions& options) : options_(options) {}

  Algorithm algorithm() const override { return Algorithm::kEvolutionary; }
  absl::StatusOr<std::vector<Assignment>> Suggest(const SearchSpace& space,
                                                  absl::Span<const Observation> completed,
                                                  absl::Span<const Assignment> pending, int count,
                                                  uint64_t seed) const override;

 private:
  OptimizerOptions options_;
};

}  // namespace gantry::studies

#endif  // GANTRY_STUDIES_EVOLUTIONARY_SEARCH_H_
