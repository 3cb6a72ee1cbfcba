#include "studies/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "studies/bayesian_search.h"
#include "studies/evolutionary_search.h"
#include "studies/grid_search.h"
#include "studies/random_search.h"

namespace gantry::studies {
namespace {

// Upper bounds that keep one Suggest call to seconds whatever a tenant asks for.
constexpr int kMaxGridPointsPerAxis = 1000;
constexpr int kMaxRestarts = 100;
constexpr int kMaxCandidates = 100000;
constexpr int kMaxPopulation = 100000;

absl::Status CheckRange(absl::string_view field, int value, int low, int high) {
  if (value < low || value > high) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer option ", field, " is ", value, ": use ", low, " to ", high));
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(Algorithm algorithm, const OptimizerOptions& options) {
  switch (algorithm) {
    case Algorithm::kRandom:
      return absl::OkStatus();
    case Algorithm::kGrid:
      return CheckRange("grid_points_per_axis", options.grid_points_per_axis, 2,
                        kMaxGridPointsPerAxis);
    case Algorithm::kBayesian:
      if (absl::Status s =
              CheckRange("initial_random_points", options.initial_random_points, 1, kMaxPopulation);
          !s.ok()) {
        return s;
      }
      if (absl::Status s = CheckRange("hyperparameter_restarts", options.hyperparameter_restarts, 1,
                                      kMaxRestarts);
          !s.ok()) {
        return s;
      }
      if (absl::Status s = CheckRange("acquisition_candidates", options.acquisition_candidates, 1,
                                      kMaxCandidates);
          !s.ok()) {
        return s;
      }
      return CheckRange("acquisition_restarts", options.acquisition_restarts, 1, kMaxRestarts);
    case Algorithm::kEvolutionary:
      if (absl::Status s =
              CheckRange("population_size", options.population_size, 2, kMaxPopulation);
          !s.ok()) {
        return s;
      }
      if (!(options.fit_fraction > 0 && options.fit_fraction <= 1)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "optimizer option fit_fraction is ", options.fit_fraction, ": use a value in (0, 1]"));
      }
      if (!(std::isfinite(options.mutation_stddev) && options.mutation_stddev >= 0 &&
            options.mutation_stddev <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("optimizer option mutation_stddev is ", options.mutation_stddev,
                         ": use a value in [0, 1] (a fraction of each axis)"));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("unknown algorithm");
}

}  // namespace

absl::string_view AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kRandom:
      return "random";
    case Algorithm::kGrid:
      return "grid";
    case Algorithm::kBayesian:
      return "bayesian";
    case Algorithm::kEvolutionary:
      return "evolutionary";
  }
  return "unknown";
}

absl::StatusOr<Algorithm> ParseAlgorithm(absl::string_view name) {
  for (Algorithm algorithm :
       {Algorithm::kRandom, Algorithm::kGrid, Algorithm::kBayesian, Algorithm::kEvolutionary}) {
    if (name == AlgorithmName(algorithm)) return algorithm;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown search algorithm \"", name,
                                                 "\": use random, grid, bayesian or evolutionary"));
}

absl::Status Optimizer::CheckBudget(const SearchSpace&, int64_t max_trials) const {
  if (max_trials < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max trials is ", max_trials, ": a study needs at least one trial"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(Algorithm algorithm,
                                                         const OptimizerOptions& options) {
  if (absl::Status status = CheckOptions(algorithm, options); !status.ok()) return status;
  switch (algorithm) {
    case Algorithm::kRandom:
      return std::unique_ptr<Optimizer>(new RandomSearch());
    case Algorithm::kGrid:
      return std::unique_ptr<Optimizer>(new GridSearch(options.grid_points_per_axis));
    case Algorithm::kBayesian:
      return std::unique_ptr<Optimizer>(new BayesianSearch(options));
    case Algorithm::kEvolutionary:
      return std::unique_ptr<Optimizer>(new EvolutionarySearch(options));
  }
  return absl::InvalidArgumentError("unknown search algorithm");
}

}  // namespace gantry::studies
