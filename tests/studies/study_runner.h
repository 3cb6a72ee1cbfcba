// Runs a sequential study of an analytic objective through an Optimizer (one trial at a time, or
// batches of `parallel` pending trials), as the server's driver would, for tests and benchmarks.
#ifndef GANTRY_TESTS_STUDIES_STUDY_RUNNER_H_
#define GANTRY_TESTS_STUDIES_STUDY_RUNNER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "studies/optimizer.h"
#include "studies/random_source.h"
#include "tests/studies/analytic_objectives.h"

namespace gantry::studies::testing {

struct StudyRun {
  std::vector<Observation> observations;  // in trial order, with noise when the objective has it
  std::vector<double> true_values;        // the noise-free values, in trial order
  // The 1-based trial that first reached `target` (noise-free), or trials + 1 if none did.
  int EvaluationsToReach(double target) const {
    for (size_t i = 0; i < true_values.size(); ++i) {
      if (true_values[i] <= target) return static_cast<int>(i) + 1;
    }
    return static_cast<int>(true_values.size()) + 1;
  }
  double BestTrueValue(size_t first_trials) const {
    double best = 1e300;
    for (size_t i = 0; i < first_trials && i < true_values.size(); ++i) {
      best = std::min(best, true_values[i]);
    }
    return best;
  }
};

// `trials` evaluations, `parallel` suggested per call (the batch is pending while suggested).
inline absl::StatusOr<StudyRun> RunStudy(const Optimizer& optimizer,
                                         const AnalyticObjective& objective, int trials,
                                         uint64_t seed, int parallel = 1) {
  StudyRun run;
  RandomSource noise(RandomSource::Mix(seed, 0xab));
  while (static_cast<int>(run.observations.size()) < trials) {
    const int count = std::min(parallel, trials - static_cast<int>(run.observations.size()));
    absl::StatusOr<std::vector<Assignment>> suggested =
        optimizer.Suggest(objective.space, run.observations, {}, count, seed);
    if (!suggested.ok()) return suggested.status();
    for (const Assignment& assignment : *suggested) {
      const double value = objective.value(assignment);
      run.true_values.push_back(value);
      Observation observation{assignment, value + objective.noise * noise.Normal(), std::nullopt};
      run.observations.push_back(std::move(observation));
    }
  }
  return run;
}

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace gantry::studies::testing

#endif  // GANTRY_TESTS_STUDIES_STUDY_RUNNER_H_
