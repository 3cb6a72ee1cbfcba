#include "studies/bayesian_search.h"

#include <nlopt.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "studies/gaussian_process.h"
#include "studies/random_source.h"
#include "studies/search_history.h"
#include "studies/unit_cube.h"

namespace gantry::studies {
namespace {

// Evaluations of one local maximisation of EI.
constexpr int kLocalEvaluations = 150;
// Observed points (best first) that also seed local maximisations.
constexpr int kObservedStarts = 2;
// Draws until a random point is new (a small discrete space may have none left).
constexpr int kAttemptsForNewPoint = 20;

// Expected improvement of a prediction over `best` (minimisation), with a small margin
// `xi` that keeps some exploration going.
double ExpectedImprovement(const GaussianProcess::Prediction& prediction, double best, double xi) {
  const double improvement = best - prediction.mean - xi;
  if (prediction.stddev <= 1e-12) return std::max(improvement, 0.0);
  const double z = improvement / prediction.stddev;
  const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
  return improvement * cdf + prediction.stddev * pdf;
}

struct AcquisitionProblem {
  const GaussianProcess* process;
  double best;
  double xi;
};

double AcquisitionObjective(unsigned size, const double* x, double* /*gradient*/, void* data) {
  const auto& problem = *static_cast<const AcquisitionProblem*>(data);
  const Eigen::Map<const Eigen::VectorXd> point(x, size);
  return ExpectedImprovement(problem.process->Predict(point), problem.best, problem.xi);
}

Eigen::MatrixXd Rows(const std::vector<Eigen::VectorXd>& points, int dimensions) {
  Eigen::MatrixXd matrix(points.size(), dimensions);
  for (size_t i = 0; i < points.size(); ++i) matrix.row(i) = points[i].transpose();
  return matrix;
}

absl::Status CheckCoordinates(const UnitCube& cube) {
  if (cube.dimensions() > BayesianSearch::kMaxCoordinates) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the search space has ", cube.dimensions(),
        " coordinates (one per numeric parameter, one per categorical choice); bayesian search "
        "takes at most ",
        BayesianSearch::kMaxCoordinates,
        ": use fewer parameters or choices, or the evolutionary or random algorithm"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BayesianSearch::CheckBudget(const SearchSpace& space, int64_t max_trials) const {
  if (absl::Status status = Optimizer::CheckBudget(space, max_trials); !status.ok()) {
    return status;
  }
  return CheckCoordinates(UnitCube(space));
}

absl::StatusOr<std::vector<Assignment>> BayesianSearch::Suggest(
    const SearchSpace& space, absl::Span<const Observation> completed,
    absl::Span<const Assignment> pending, int count, uint64_t seed) const {
  if (absl::Status status = CheckSuggestArguments(space, completed, pending, count); !status.ok()) {
    return status;
  }
  RandomSource random(SuggestSeed(seed, completed.size(), pending.size()));
  const UnitCube cube(space);
  if (absl::Status status = CheckCoordinates(cube); !status.ok()) return status;
  const int dimensions = cube.dimensions();
  std::vector<Eigen::VectorXd> taken = EncodeHistory(cube, completed, pending);
  const std::vector<double> objectives = FiniteObjectives(completed);
  const size_t n = completed.size();

  auto new_random_point = [&]() {
    Eigen::VectorXd point;
    for (int attempt = 0; attempt < kAttemptsForNewPoint; ++attempt) {
      point = cube.Project(cube.Sample(random));
      if (!ContainsPoint(taken, point)) break;
    }
    return point;
  };

  // The observations the GP models: all of them up to kMaxModelledObservations, else the best
  // half of that and the most recent others (the fit is cubic in their number).
  std::vector<size_t> modelled;
  if (n <= static_cast<size_t>(kMaxModelledObservations)) {
    modelled.resize(n);
    std::iota(modelled.begin(), modelled.end(), 0);
  } else {
    std::vector<size_t> by_value(n);
    std::iota(by_value.begin(), by_value.end(), 0);
    std::stable_sort(by_value.begin(), by_value.end(),
                     [&](size_t a, size_t b) { return objectives[a] < objectives[b]; });
    std::vector<bool> chosen(n, false);
    for (int i = 0; i < kMaxModelledObservations / 2; ++i) chosen[by_value[i]] = true;
    int recent = kMaxModelledObservations - kMaxModelledObservations / 2;
    for (size_t i = n; i-- > 0 && recent > 0;) {
      if (!chosen[i]) {
        chosen[i] = true;
        --recent;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (chosen[i]) modelled.push_back(i);
    }
  }
  const size_t m = modelled.size();
  std::vector<Eigen::VectorXd> modelled_points;
  Eigen::VectorXd observed_targets(m), observed_noise(m);
  for (size_t j = 0; j < m; ++j) {
    const size_t i = modelled[j];
    modelled_points.push_back(taken[i]);
    observed_targets[j] = objectives[i];
    const double stddev = completed[i].stddev.value_or(0.0);
    observed_noise[j] = stddev * stddev;
  }
  std::optional<GaussianProcess> process;
  const double best_observed =
      n > 0 ? *std::min_element(objectives.begin(), objectives.end()) : 0.0;
  // Observed points best first: seeds of the local maximisations.
  std::vector<size_t> ranked(n);
  std::iota(ranked.begin(), ranked.end(), 0);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](size_t a, size_t b) { return objectives[a] < objectives[b]; });

  // EI's margin: 1% of the objectives' spread, so it keeps its meaning whatever their scale.
  double exploration_margin = 0;
  if (n > 0) {
    const double mean = std::accumulate(objectives.begin(), objectives.end(), 0.0) / n;
    double variance = 0;
    for (double y : objectives) variance += (y - mean) * (y - mean) / n;
    exploration_margin = 0.01 * std::sqrt(variance);
  }

  std::vector<Assignment> suggestions;
  for (int k = 0; k < count; ++k) {
    const size_t history = taken.size();
    if (history < static_cast<size_t>(options_.initial_random_points) || n < 2) {
      const Eigen::VectorXd point = new_random_point();
      taken.push_back(point);
      suggestions.push_back(cube.Decode(point));
      continue;
    }
    if (!process.has_value()) {
      absl::StatusOr<GaussianProcess> fitted =
          GaussianProcess::Fit(Rows(modelled_points, dimensions), observed_targets, observed_noise,
                               options_.hyperparameter_restarts, random);
      if (!fitted.ok()) return fitted.status();
      process = *std::move(fitted);
    }
    if (taken.size() > n) {
      // Constant liar: pending and already chosen points count as observed at the best value.
      std::vector<Eigen::VectorXd> points = modelled_points;
      points.insert(points.end(), taken.begin() + n, taken.end());
      const size_t lies = taken.size() - n;
      Eigen::VectorXd targets(m + lies), noise(m + lies);
      targets.head(m) = observed_targets;
      targets.tail(lies).setConstant(best_observed);
      noise.head(m) = observed_noise;
      noise.tail(lies).setZero();
      if (absl::Status status = process->Condition(Rows(points, dimensions), targets, noise);
          !status.ok()) {
        return status;
      }
    }
    AcquisitionProblem problem{&*process, best_observed, exploration_margin};

    // Candidates: random points, projected, scored; the best of them and the best observed
    // points start local maximisations on the relaxed cube, whose results are projected too.
    std::vector<std::pair<double, Eigen::VectorXd>> scored;
    scored.reserve(options_.acquisition_candidates + options_.acquisition_restarts);
    for (int c = 0; c < options_.acquisition_candidates; ++c) {
      Eigen::VectorXd point = cube.Project(cube.Sample(random));
      const double score = ExpectedImprovement(process->Predict(point), problem.best, problem.xi);
      scored.emplace_back(score, std::move(point));
    }
    std::stable_sort(scored.begin(), scored.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<Eigen::VectorXd> starts;
    for (int s = 0; s < options_.acquisition_restarts && s < static_cast<int>(scored.size()); ++s) {
      starts.push_back(scored[s].second);
    }
    for (int s = 0; s < kObservedStarts && s < static_cast<int>(ranked.size()); ++s) {
      starts.push_back(taken[ranked[s]]);
    }
    nlopt_opt local = nlopt_create(NLOPT_LN_BOBYQA, dimensions);
    const std::vector<double> lower(dimensions, 0.0), upper(dimensions, 1.0);
    nlopt_set_lower_bounds(local, lower.data());
    nlopt_set_upper_bounds(local, upper.data());
    nlopt_set_max_objective(local, AcquisitionObjective, &problem);
    nlopt_set_maxeval(local, kLocalEvaluations);
    nlopt_set_xtol_abs1(local, 1e-5);
    for (const Eigen::VectorXd& start : starts) {
      std::vector<double> x(start.data(), start.data() + dimensions);
      double value = 0;
      nlopt_optimize(local, x.data(), &value);  // keeps the best point reached on any stop
      Eigen::VectorXd point = cube.Project(Eigen::Map<Eigen::VectorXd>(x.data(), dimensions));
      const double score = ExpectedImprovement(process->Predict(point), problem.best, problem.xi);
      scored.emplace_back(score, std::move(point));
    }
    nlopt_destroy(local);
    std::stable_sort(scored.begin(), scored.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });

    std::optional<Eigen::VectorXd> chosen;
    for (const auto& [score, point] : scored) {
      if (!ContainsPoint(taken, point)) {
        chosen = point;
        break;
      }
    }
    const Eigen::VectorXd point = chosen.has_value() ? *chosen : new_random_point();
    taken.push_back(point);
    suggestions.push_back(cube.Decode(point));
  }
  return suggestions;
}

}  // namespace gantry::studies
