#include "server/studies/optimizer.h"

namespace gantry::studies {

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

absl::StatusOr<Algorithm> ParseAlgorithm(absl::string_view) {
  return absl::UnimplementedError("ParseAlgorithm: not implemented yet");
}

absl::Status Optimizer::CheckBudget(const SearchSpace&, int64_t) const { return absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(Algorithm, const OptimizerOptions&) {
  return absl::UnimplementedError("MakeOptimizer: not implemented yet");
}

}  // namespace gantry::studies
