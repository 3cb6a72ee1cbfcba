// The study search algorithms on analytic objectives: evaluations needed to reach a target
// (median over seeds) for GP-EI, evolutionary and random search, and the GP's suggestion time at
// growing history sizes. Pure computation, one thread. Run by hand:
//   build/tests/bench/study_search_bench [--seeds=10] [--timing-sizes=100,500,1000]
// Figures in docs/BENCHMARKS.md "Study search algorithms".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "studies/optimizer.h"
#include "tests/bench/bench_flags.h"
#include "tests/studies/analytic_objectives.h"
#include "tests/studies/study_runner.h"

namespace gantry::studies {
namespace {

using testing::AnalyticObjective;

struct Contender {
  Algorithm algorithm;
  int budget;
};

int Run(int argc, char** argv) {
  int seeds = 10;
  if (!absl::SimpleAtoi(bench::BenchFlag(argc, argv, "seeds", "10"), &seeds) || seeds < 1) {
    std::fprintf(stderr, "--seeds must be a positive integer\n");
    return 2;
  }
  std::vector<int> timing_sizes;
  for (absl::string_view size :
       absl::StrSplit(bench::BenchFlag(argc, argv, "timing-sizes", "100,500,1000"), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(size, &n) || n < 2) {
      std::fprintf(stderr, "--timing-sizes takes integers >= 2, comma separated\n");
      return 2;
    }
    timing_sizes.push_back(n);
  }

  struct Case {
    AnalyticObjective objective;
    double target;
  };
  const std::vector<Case> cases = {{testing::Branin(), 0.397887 + 0.1},
                                   {testing::Hartmann3(), -3.86278 + 0.1},
                                   {testing::NoisyQuadratic(), 0.15}};
  const std::vector<Contender> contenders = {
      {Algorithm::kBayesian, 60}, {Algorithm::kEvolutionary, 300}, {Algorithm::kRandom, 500}};
  std::printf("%-16s %-13s %7s %9s %8s %12s %10s\n", "objective", "algorithm", "budget", "reached",
              "median", "median_best", "wall_s");
  for (const Case& c : cases) {
    for (const Contender& contender : contenders) {
      absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(contender.algorithm);
      if (!optimizer.ok()) return 1;
      std::vector<double> evaluations, best;
      int reached = 0;
      const auto start = std::chrono::steady_clock::now();
      for (int seed = 1; seed <= seeds; ++seed) {
        absl::StatusOr<testing::StudyRun> run =
            testing::RunStudy(**optimizer, c.objective, contender.budget, seed);
        if (!run.ok()) {
          std::fprintf(stderr, "%s\n", run.status().ToString().c_str());
          return 1;
        }
        const int needed = run->EvaluationsToReach(c.target);
        if (needed <= contender.budget) ++reached;
        evaluations.push_back(needed);
        best.push_back(run->BestTrueValue(contender.budget));
      }
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double median = testing::Median(evaluations);
      char median_text[32];
      std::snprintf(median_text, sizeof(median_text), "%.1f", median);
      std::printf("%-16s %-13s %7d %6d/%-2d %8s %12.4f %10.1f\n", c.objective.name.c_str(),
                  std::string(AlgorithmName(contender.algorithm)).c_str(), contender.budget,
                  reached, seeds, median > contender.budget ? ">budget" : median_text,
                  testing::Median(best), wall);
      std::fflush(stdout);
    }
  }

  // GP suggestion time: Hartmann-3 (3 continuous axes) and the mixed noisy quadratic (6 cube
  // coordinates), n random completed observations, one suggestion, median of 3 calls.
  // Wall time and this process' CPU time (the machine may be shared: CPU time is what the
  // suggestion costs, wall time what a caller waits).
  std::printf("\n%-16s %6s %12s %12s\n", "objective", "n", "suggest_s", "suggest_cpu_s");
  absl::StatusOr<std::unique_ptr<Optimizer>> bayesian = MakeOptimizer(Algorithm::kBayesian);
  absl::StatusOr<std::unique_ptr<Optimizer>> random = MakeOptimizer(Algorithm::kRandom);
  for (const AnalyticObjective& objective : {testing::Hartmann3(), testing::NoisyQuadratic()}) {
    for (int n : timing_sizes) {
      absl::StatusOr<testing::StudyRun> history = testing::RunStudy(**random, objective, n, 1);
      if (!history.ok()) return 1;
      std::vector<double> seconds, cpu_seconds;
      for (int repeat = 0; repeat < 3; ++repeat) {
        const std::clock_t cpu_start = std::clock();
        const auto start = std::chrono::steady_clock::now();
        absl::StatusOr<std::vector<Assignment>> next =
            (*bayesian)->Suggest(objective.space, history->observations, {}, 1, repeat);
        if (!next.ok()) {
          std::fprintf(stderr, "%s\n", next.status().ToString().c_str());
          return 1;
        }
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        cpu_seconds.push_back(static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
      }
      std::printf("%-16s %6d %12.3f %12.3f\n", objective.name.c_str(), n, testing::Median(seconds),
                  testing::Median(cpu_seconds));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace gantry::studies

int main(int argc, char** argv) { return gantry::studies::Run(argc, argv); }
