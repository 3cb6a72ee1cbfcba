// An Optimizer proposes the next points of a study from its history. Stateless: the suggestions
// are a pure function of (options, space, completed observations, pending assignments, count,
// seed), so a server that restarts mid-study and replays its trials from PostgreSQL proposes the
// same next points.
#ifndef GANTRY_STUDIES_OPTIMIZER_H_
#define GANTRY_STUDIES_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "studies/search_space.h"
#include "studies/study_types.h"

namespace gantry::studies {

enum class Algorithm {
  kRandom,        // uniform (log-uniform for log-continuous) sampling
  kGrid,          // a deterministic enumeration of a grid, in order, skipping points already tried
  kBayesian,      // Gaussian process (Matern 5/2 ARD) + expected improvement, constant liar batches
  kEvolutionary,  // keep the fittest fraction, children by interpolation of parents + mutation
};

// "random", "grid", "bayesian", "evolutionary".
absl::string_view AlgorithmName(Algorithm algorithm);
// The inverse of AlgorithmName; INVALID_ARGUMENT listing the accepted names otherwise.
absl::StatusOr<Algorithm> ParseAlgorithm(absl::string_view name);

// Tuning of the algorithms; the defaults suit studies of tens of trials. Each algorithm reads
// only its own fields.
struct OptimizerOptions {
  // Grid: points per continuous or log-continuous axis (ends included); an integer axis takes
  // at most this many distinct integers, a categorical axis all its choices.
  int grid_points_per_axis = 5;

  // Bayesian: random points before the Gaussian process takes over (fewer observations than
  // this, completed and pending together, give random suggestions).
  int initial_random_points = 5;
  // Bayesian: starts of the bounded maximisation of the log marginal likelihood.
  int hyperparameter_restarts = 4;
  // Bayesian: random candidates scored by expected improvement; the best of them and of the
  // observed points seed the local maximisations of EI.
  int acquisition_candidates = 2000;
  int acquisition_restarts = 8;

  // Evolutionary: the size of a generation. A study's first population_size trials are random;
  // each later suggestion is a child of two of the best round(fit_fraction * population_size)
  // (at least two) completed observations.
  int population_size = 10;
  // Evolutionary: the fraction of a generation kept as parents.
  double fit_fraction = 0.3;
  // Evolutionary: the Gaussian mutation's standard deviation, in units of each axis' width in
  // the unit cube (log axes in log scale); categorical axes switch to a random choice with this
  // probability.
  double mutation_stddev = 0.05;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  virtual Algorithm algorithm() const = 0;

  // `count` (>= 1) new assignments, each valid for `space` (SearchSpace::CheckAssignment).
  // `completed` are the finished trials in trial order, `pending` the assignments of trials still
  // running (suggested earlier, not observed yet), also in trial order: a batch avoids them.
  // `seed` is the study's seed; the optimizer mixes it with the history's size, so a constant
  // seed still gives fresh points at each call and the same points for the same history.
  //
  // INVALID_ARGUMENT when the space does not validate, count is not in [1, 1000], or an
  // observation or pending assignment does not fit the space (or has a negative or non-finite
  // stddev). Grid only: fewer than `count` when fewer untried points
  // remain, OUT_OF_RANGE when none remain.
  virtual absl::StatusOr<std::vector<Assignment>> Suggest(const SearchSpace& space,
                                                          absl::Span<const Observation> completed,
                                                          absl::Span<const Assignment> pending,
                                                          int count, uint64_t seed) const = 0;

  // OK when a study of `max_trials` trials can run on `space`; INVALID_ARGUMENT saying what to
  // change otherwise (the grid: more trials than grid points). Assumes a valid space.
  virtual absl::Status CheckBudget(const SearchSpace& space, int64_t max_trials) const;
};

// INVALID_ARGUMENT naming the field for options of the chosen algorithm out of range
// (grid_points_per_axis not in [2, 1000], initial_random_points < 1, restarts not in [1, 100],
// candidates not in [1, 100000], population_size < 2, fit_fraction not in (0, 1],
// mutation_stddev not in [0, 1]).
absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(Algorithm algorithm,
                                                         const OptimizerOptions& options = {});

}  // namespace gantry::studies

#endif  // GANTRY_STUDIES_OPTIMIZER_H_
