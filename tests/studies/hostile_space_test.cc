// Property test: spaces drawn with extreme values (huge, tiny and denormal bounds, one-value
// axes, single choices) either fail Validate with INVALID_ARGUMENT or get valid suggestions from
// every algorithm, with histories that include non-finite objectives.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "studies/optimizer.h"
#include "studies/random_source.h"
#include "studies/search_space.h"

namespace gantry::studies {
namespace {

double ExtremeNumber(RandomSource& random) {
  static const double kValues[] = {0.0,
                                   -0.0,
                                   1.0,
                                   -1.0,
                                   1e-300,
                                   std::numeric_limits<double>::denorm_min(),
                                   1e300,
                                   -1e300,
                                   std::numeric_limits<double>::max(),
                                   -std::numeric_limits<double>::max(),
                                   9007199254740992.0,
                                   -9007199254740992.0,
                                   0.5,
                                   3.0,
                                   std::numeric_limits<double>::infinity(),
                                   std::nan("")};
  if (random.Uniform() < 0.3) return (random.Uniform() - 0.5) * 100;
  return kValues[random.Below(sizeof(kValues) / sizeof(kValues[0]))];
}

SearchSpace DrawSpace(RandomSource& random) {
  std::vector<Parameter> parameters;
  const int count = 1 + static_cast<int>(random.Below(4));
  for (int i = 0; i < count; ++i) {
    Parameter parameter;
    parameter.name = "p" + std::to_string(i);
    parameter.kind = static_cast<ParameterKind>(random.Below(4));
    if (parameter.kind == ParameterKind::kCategorical) {
      const int choices = 1 + static_cast<int>(random.Below(4));
      for (int c = 0; c < choices; ++c) parameter.choices.push_back("c" + std::to_string(c));
    } else {
      parameter.low = ExtremeNumber(random);
      parameter.high =
          random.Uniform() < 0.3 ? std::nextafter(parameter.low, INFINITY) : ExtremeNumber(random);
      if (parameter.kind == ParameterKind::kInteger && random.Uniform() < 0.5) {
        parameter.low = std::round(parameter.low);
        parameter.high = parameter.low + 1;
      }
    }
    parameters.push_back(parameter);
  }
  return SearchSpace(parameters);
}

TEST(HostileSpaceTest, ValidSpacesGetValidSuggestionsFromEveryAlgorithm) {
  RandomSource random(2024);
  int valid = 0;
  for (int round = 0; round < 300; ++round) {
    const SearchSpace space = DrawSpace(random);
    const absl::Status status = space.Validate();
    if (!status.ok()) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    ++valid;
    for (Algorithm algorithm :
         {Algorithm::kRandom, Algorithm::kGrid, Algorithm::kBayesian, Algorithm::kEvolutionary}) {
      OptimizerOptions options;
      options.initial_random_points = 2;
      options.population_size = 3;
      options.acquisition_candidates = 50;
      options.acquisition_restarts = 2;
      options.hyperparameter_restarts = 1;
      absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(algorithm, options);
      ASSERT_TRUE(optimizer.ok());
      std::vector<Observation> completed;
      std::set<std::string> grid_points;
      for (int trial = 0; trial < 8; ++trial) {
        absl::StatusOr<std::vector<Assignment>> next =
            (*optimizer)->Suggest(space, completed, {}, 2, round);
        if (algorithm == Algorithm::kGrid && absl::IsOutOfRange(next.status())) break;
        ASSERT_TRUE(next.ok()) << AlgorithmName(algorithm) << ": " << next.status();
        for (const Assignment& a : *next) {
          ASSERT_TRUE(space.CheckAssignment(a).ok())
              << AlgorithmName(algorithm) << ": " << space.CheckAssignment(a);
          if (algorithm == Algorithm::kGrid) {
            // A narrow range must not make the grid repeat a point.
            EXPECT_TRUE(grid_points.insert(FormatAssignment(a)).second) << FormatAssignment(a);
          }
          const double objective = trial % 3 == 2 ? std::nan("") : random.Normal();
          completed.push_back({a, objective, std::nullopt});
        }
      }
    }
  }
  EXPECT_GT(valid, 50);  // the draw must exercise the searches, not only Validate
}

}  // namespace
}  // namespace gantry::studies
