// The optimizers on analytic objectives with fixed seeds: validity of every suggestion,
// statelessness, the grid's enumeration, GP-EI against random search, the evolutionary search's
// progress across generations, and bad options.
#include "studies/optimizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "tests/studies/analytic_objectives.h"
#include "tests/studies/study_runner.h"

namespace gantry::studies {
namespace {

using testing::AnalyticObjective;
using ::testing::HasSubstr;
using testing::Median;
using testing::RunStudy;
using testing::StudyRun;

std::unique_ptr<Optimizer> Make(Algorithm algorithm, const OptimizerOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(algorithm, options);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return *std::move(optimizer);
}

constexpr Algorithm kAll[] = {Algorithm::kRandom, Algorithm::kGrid, Algorithm::kBayesian,
                              Algorithm::kEvolutionary};

TEST(OptimizerTest, SuggestionsStayInsideTheSpaceWithValidTypes) {
  const AnalyticObjective objective = testing::NoisyQuadratic();
  for (Algorithm algorithm : kAll) {
    SCOPED_TRACE(AlgorithmName(algorithm));
    std::unique_ptr<Optimizer> optimizer = Make(algorithm);
    absl::StatusOr<StudyRun> run = RunStudy(*optimizer, objective, 24, 7, /*parallel=*/3);
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->observations.size(), 24u);
    std::set<std::string> distinct;
    for (const Observation& observation : run->observations) {
      const Assignment& a = observation.assignment;
      EXPECT_TRUE(objective.space.CheckAssignment(a).ok())
          << objective.space.CheckAssignment(a) << " " << FormatAssignment(a);
      EXPECT_TRUE(std::holds_alternative<int64_t>(a.at("layers")));
      EXPECT_TRUE(std::holds_alternative<std::string>(a.at("optimizer")));
      const double lr = std::get<double>(a.at("lr"));
      EXPECT_TRUE(lr >= 1e-5 && lr <= 1e-1) << lr;
      distinct.insert(FormatAssignment(a));
    }
    EXPECT_EQ(distinct.size(), 24u) << "an optimizer repeated a point of a large space";
  }
}

TEST(OptimizerTest, SameHistoryAndSeedGiveTheSameSuggestions) {
  const AnalyticObjective objective = testing::NoisyQuadratic();
  for (Algorithm algorithm : kAll) {
    SCOPED_TRACE(AlgorithmName(algorithm));
    std::unique_ptr<Optimizer> optimizer = Make(algorithm);
    absl::StatusOr<StudyRun> run = RunStudy(*optimizer, objective, 12, 11);
    ASSERT_TRUE(run.ok()) << run.status();
    // The history as the server replays it after a restart: through text, two trials pending.
    std::vector<Observation> replayed;
    for (size_t i = 0; i < 10; ++i) {
      const Observation& o = run->observations[i];
      absl::StatusOr<Assignment> a =
          objective.space.ParseAssignment(FormatAssignment(o.assignment));
      ASSERT_TRUE(a.ok()) << a.status();
      replayed.push_back({*a, o.objective, o.stddev});
    }
    const std::vector<Assignment> pending = {run->observations[10].assignment,
                                             run->observations[11].assignment};
    absl::StatusOr<std::vector<Assignment>> first =
        optimizer->Suggest(objective.space, run->observations, pending, 3, 99);
    std::unique_ptr<Optimizer> restarted = Make(algorithm);
    absl::StatusOr<std::vector<Assignment>> again =
        restarted->Suggest(objective.space, run->observations, pending, 3, 99);
    ASSERT_TRUE(first.ok() && again.ok());
    EXPECT_EQ(*first, *again);
    absl::StatusOr<std::vector<Assignment>> from_text =
        restarted->Suggest(objective.space, replayed, pending, 2, 5);
    absl::StatusOr<std::vector<Assignment>> from_memory = optimizer->Suggest(
        objective.space, absl::MakeConstSpan(run->observations).first(10), pending, 2, 5);
    ASSERT_TRUE(from_text.ok() && from_memory.ok());
    EXPECT_EQ(*from_text, *from_memory);
    if (algorithm != Algorithm::kGrid) {
      absl::StatusOr<std::vector<Assignment>> other_seed =
          optimizer->Suggest(objective.space, run->observations, pending, 3, 100);
      ASSERT_TRUE(other_seed.ok());
      EXPECT_NE(*other_seed, *first);
    }
  }
}

TEST(OptimizerTest, GridEnumeratesEveryPointOnceThenRunsOut) {
  const SearchSpace space({{"x", ParameterKind::kContinuous, 0, 1, {}},
                           {"n", ParameterKind::kInteger, 2, 3, {}},
                           {"opt", ParameterKind::kCategorical, 0, 0, {"a", "b"}}});
  OptimizerOptions options;
  options.grid_points_per_axis = 3;
  std::unique_ptr<Optimizer> grid = Make(Algorithm::kGrid, options);
  EXPECT_TRUE(grid->CheckBudget(space, 12).ok());
  const absl::Status too_many = grid->CheckBudget(space, 13);
  EXPECT_EQ(too_many.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_many.message()), HasSubstr("the grid has 12 points"));

  std::vector<Observation> completed;
  std::vector<Assignment> pending;
  std::set<std::string> seen;
  while (true) {
    absl::StatusOr<std::vector<Assignment>> batch = grid->Suggest(space, completed, pending, 5, 1);
    if (!batch.ok()) {
      EXPECT_EQ(batch.status().code(), absl::StatusCode::kOutOfRange);
      break;
    }
    for (const Assignment& a : *batch) {
      EXPECT_TRUE(seen.insert(FormatAssignment(a)).second) << FormatAssignment(a);
      // Half of each batch stays pending, the rest completes: both are skipped.
      if (seen.size() % 2 == 0) {
        pending.push_back(a);
      } else {
        completed.push_back({a, 0.0, std::nullopt});
      }
    }
    ASSERT_LE(seen.size(), 12u);
  }
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_EQ(*seen.begin(), "n=2,opt=a,x=0");
  EXPECT_TRUE(seen.count("n=3,opt=b,x=0.5"));
}

TEST(OptimizerTest, BayesianReachesBraninMinimumInFewerEvaluationsThanRandom) {
  // Target: within 0.1 of Branin's minimum 0.397887; budgets 40 (GP) and 150 (random).
  const AnalyticObjective branin = testing::Branin();
  const double target = branin.minimum + 0.1;
  std::unique_ptr<Optimizer> bayesian = Make(Algorithm::kBayesian);
  std::unique_ptr<Optimizer> random = Make(Algorithm::kRandom);
  std::vector<double> bayesian_evaluations, random_evaluations, bayesian_best;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    absl::StatusOr<StudyRun> b = RunStudy(*bayesian, branin, 40, seed);
    absl::StatusOr<StudyRun> r = RunStudy(*random, branin, 150, seed);
    ASSERT_TRUE(b.ok() && r.ok());
    bayesian_evaluations.push_back(b->EvaluationsToReach(target));
    random_evaluations.push_back(r->EvaluationsToReach(target));
    bayesian_best.push_back(b->BestTrueValue(40));
  }
  EXPECT_LE(Median(bayesian_best), target);
  EXPECT_LE(Median(bayesian_evaluations), 40);
  EXPECT_LT(Median(bayesian_evaluations), Median(random_evaluations));
}

TEST(OptimizerTest, BayesianFindsTheNoisyQuadraticsMinimumBetterThanRandom) {
  // Noise 0.05 per observation; target: a true value within 0.15 of the minimum 0.
  const AnalyticObjective objective = testing::NoisyQuadratic();
  std::unique_ptr<Optimizer> bayesian = Make(Algorithm::kBayesian);
  std::unique_ptr<Optimizer> random = Make(Algorithm::kRandom);
  std::vector<double> bayesian_best, random_best;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    absl::StatusOr<StudyRun> b = RunStudy(*bayesian, objective, 40, seed, /*parallel=*/2);
    absl::StatusOr<StudyRun> r = RunStudy(*random, objective, 40, seed);
    ASSERT_TRUE(b.ok() && r.ok());
    bayesian_best.push_back(b->BestTrueValue(40));
    random_best.push_back(r->BestTrueValue(40));
  }
  EXPECT_LE(Median(bayesian_best), objective.minimum + 0.15);
  EXPECT_LT(Median(bayesian_best), Median(random_best));
}

TEST(OptimizerTest, EvolutionaryImprovesTheBestFitnessAcrossGenerations) {
  const AnalyticObjective objective = testing::Hartmann3();
  OptimizerOptions options;
  options.population_size = 10;
  std::unique_ptr<Optimizer> evolutionary = Make(Algorithm::kEvolutionary, options);
  std::vector<double> first_generation, last_generation;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    absl::StatusOr<StudyRun> run = RunStudy(*evolutionary, objective, 80, seed, 10);
    ASSERT_TRUE(run.ok()) << run.status();
    double previous = 1e300;
    for (size_t generation = 1; generation <= 8; ++generation) {
      const double best = run->BestTrueValue(10 * generation);
      EXPECT_LE(best, previous);
      previous = best;
    }
    first_generation.push_back(run->BestTrueValue(10));
    last_generation.push_back(run->BestTrueValue(80));
    EXPECT_LT(run->BestTrueValue(80), run->BestTrueValue(10)) << "seed " << seed;
  }
  // Eight generations of ten bring the median best within 0.25 of Hartmann-3's minimum -3.86278
  // and clearly below the random first generation's.
  EXPECT_LT(Median(last_generation), objective.minimum + 0.25)
      << "first generation median best " << Median(first_generation);
  EXPECT_LT(Median(last_generation), Median(first_generation) - 0.2)
      << "first generation median best " << Median(first_generation);
}

TEST(OptimizerTest, ASpentSmallSpaceStillGetsValidSuggestions) {
  // Three points in all, all tried: the searches that never run out repeat valid points.
  const SearchSpace space({{"n", ParameterKind::kInteger, 1, 3, {}}});
  std::vector<Observation> completed;
  for (int64_t n = 1; n <= 3; ++n) completed.push_back({{{"n", n}}, static_cast<double>(n), {}});
  for (Algorithm algorithm : {Algorithm::kRandom, Algorithm::kBayesian, Algorithm::kEvolutionary}) {
    SCOPED_TRACE(AlgorithmName(algorithm));
    OptimizerOptions options;
    options.initial_random_points = 2;
    options.population_size = 2;
    absl::StatusOr<std::vector<Assignment>> next =
        Make(algorithm, options)->Suggest(space, completed, {}, 4, 1);
    ASSERT_TRUE(next.ok()) << next.status();
    ASSERT_EQ(next->size(), 4u);
    for (const Assignment& a : *next) EXPECT_TRUE(space.CheckAssignment(a).ok());
  }
  EXPECT_EQ(Make(Algorithm::kGrid)->Suggest(space, completed, {}, 1, 1).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(OptimizerTest, BayesianFindsTheMinimumOfOneContinuousAxis) {
  const SearchSpace space({{"x", ParameterKind::kContinuous, -2, 2, {}}});
  const auto value = [](const Assignment& a) {
    const double x = std::get<double>(a.at("x"));
    return (x - 0.7) * (x - 0.7);
  };
  std::unique_ptr<Optimizer> bayesian = Make(Algorithm::kBayesian);
  std::vector<Observation> completed;
  for (int trial = 0; trial < 15; ++trial) {
    absl::StatusOr<std::vector<Assignment>> next = bayesian->Suggest(space, completed, {}, 1, 4);
    ASSERT_TRUE(next.ok()) << next.status();
    completed.push_back({next->front(), value(next->front()), std::nullopt});
  }
  double best = 1e300;
  for (const Observation& o : completed) best = std::min(best, o.objective);
  EXPECT_LT(best, 1e-3);
}

TEST(OptimizerTest, NonFiniteObjectivesCountAsTheWorst) {
  const AnalyticObjective objective = testing::Branin();
  for (Algorithm algorithm : {Algorithm::kBayesian, Algorithm::kEvolutionary}) {
    std::unique_ptr<Optimizer> optimizer = Make(algorithm);
    absl::StatusOr<StudyRun> run = RunStudy(*optimizer, objective, 12, 3);
    ASSERT_TRUE(run.ok());
    run->observations[2].objective = std::nan("");
    run->observations[5].objective = std::numeric_limits<double>::infinity();
    absl::StatusOr<std::vector<Assignment>> next =
        optimizer->Suggest(objective.space, run->observations, {}, 2, 3);
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ(next->size(), 2u);
  }
}

TEST(OptimizerTest, BadArgumentsAndOptionsAreRejected) {
  const AnalyticObjective objective = testing::Branin();
  std::unique_ptr<Optimizer> optimizer = Make(Algorithm::kBayesian);
  EXPECT_EQ(optimizer->Suggest(objective.space, {}, {}, 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(optimizer->Suggest(SearchSpace(), {}, {}, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  Observation outside{{{"x1", 50.0}, {"x2", 1.0}}, 1.0, std::nullopt};
  EXPECT_THAT(
      std::string(optimizer->Suggest(objective.space, {outside}, {}, 1, 1).status().message()),
      HasSubstr("completed observation 0: search space parameter \"x1\""));
  Observation negative_noise{{{"x1", 1.0}, {"x2", 1.0}}, 1.0, -1.0};
  EXPECT_THAT(
      std::string(
          optimizer->Suggest(objective.space, {negative_noise}, {}, 1, 1).status().message()),
      HasSubstr("stddev"));
  EXPECT_THAT(
      std::string(optimizer->Suggest(objective.space, {}, {Assignment{}}, 1, 1).status().message()),
      HasSubstr("pending assignment 0"));
  EXPECT_EQ(optimizer->CheckBudget(objective.space, 0).code(), absl::StatusCode::kInvalidArgument);

  std::vector<std::string> choices;
  for (int c = 0; c < 65; ++c) choices.push_back("c" + std::to_string(c));
  const SearchSpace wide({{"choice", ParameterKind::kCategorical, 0, 0, choices}});
  EXPECT_THAT(std::string(optimizer->CheckBudget(wide, 10).message()), HasSubstr("65 coordinates"));
  EXPECT_EQ(optimizer->Suggest(wide, {}, {}, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Make(Algorithm::kEvolutionary)->Suggest(wide, {}, {}, 1, 1).ok());

  OptimizerOptions options;
  options.grid_points_per_axis = 1;
  EXPECT_THAT(std::string(MakeOptimizer(Algorithm::kGrid, options).status().message()),
              HasSubstr("grid_points_per_axis is 1"));
  options = {};
  options.fit_fraction = 0;
  EXPECT_THAT(std::string(MakeOptimizer(Algorithm::kEvolutionary, options).status().message()),
              HasSubstr("fit_fraction"));
  options = {};
  options.hyperparameter_restarts = 0;
  EXPECT_THAT(std::string(MakeOptimizer(Algorithm::kBayesian, options).status().message()),
              HasSubstr("hyperparameter_restarts"));
  EXPECT_THAT(std::string(ParseAlgorithm("tpe").status().message()),
              HasSubstr("use random, grid, bayesian or evolutionary"));
  for (Algorithm algorithm : kAll) EXPECT_EQ(*ParseAlgorithm(AlgorithmName(algorithm)), algorithm);
}

}  // namespace
}  // namespace gantry::studies
