// BayesianSearch is Gaussian-process Bayesian optimisation (Snoek et al. 2012): after
// initial_random_points random trials, it fits a GaussianProcess to the completed observations
// in the unit cube and suggests the point of largest expected improvement over the best
// observation, found by scoring random candidates and refining the best of them, and the best
// observed points, with NLopt's BOBYQA. Suggestions are projected onto valid assignments
// (integers rounded, categoricals one-hot) before they are scored. A batch, and pending trials,
// use the constant liar: each pending or already chosen point is added to the GP with the best
// observed value as its assumed outcome, so the next point goes elsewhere.
#ifndef GANTRY_STUDIES_BAYESIAN_SEARCH_H_
#define GANTRY_STUDIES_BAYESIAN_SEARCH_H_

#include "studies/optimizer.h"

namespace gantry::studies {

class BayesianSearch : public Optimizer {
 public:
  explicit BayesianSearch(const OptimizerOptions& options) : options_(options) {}

  Algorithm algorithm() const override { return Algorithm::kBayesian; }
  absl::StatusOr<std::vector<Assignment>> Suggest(const SearchSpace& space,
                                                  absl::Span<const Observation> completed,
                                                  absl::Span<const Assignment> pending, int count,
                                                  uint64_t seed) const override;
  // Also INVALID_ARGUMENT when the space has more than kMaxCoordinates cube coordinates.
  absl::Status CheckBudget(const SearchSpace& space, int64_t max_trials) const override;

  // One coordinate per numeric parameter and one per choice of a categorical one. The local
  // maximiser (BOBYQA) needs memory quadratic in it, so a space beyond this is refused (the
  // evolutionary and random searches take it).
  static constexpr int kMaxCoordinates = 64;
  // The GP's fit is cubic in the observations it models: beyond this many completed ones it
  // models the best half of this number and the most recent others.
  static constexpr int kMaxModelledObservations = 500;

 private:
  OptimizerOptions options_;
};

}  // namespace gantry::studies

#endif  // GANTRY_STUDIES_BAYESIAN_SEARCH_H_
