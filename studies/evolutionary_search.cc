#include "studies/evolutionary_search.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "studies/random_source.h"
#include "studies/search_history.h"
#include "studies/unit_cube.h"

namespace gantry::studies {
namespace {

// Draws until the point is new, a few times; a small discrete space may have no new point left,
// and a repeated trial is then better than none.
constexpr int kAttemptsForNewPoint = 20;

}  // namespace

absl::StatusOr<std::vector<Assignment>> EvolutionarySearch::Suggest(
    const SearchSpace& space, absl::Span<const Observation> completed,
    absl::Span<const Assignment> pending, int count, uint64_t seed) const {
  if (absl::Status status = CheckSuggestArguments(space, completed, pending, count); !status.ok()) {
    return status;
  }
  RandomSource random(SuggestSeed(seed, completed.size(), pending.size()));
  const UnitCube cube(space);
  std::vector<Eigen::VectorXd> taken = EncodeHistory(cube, completed, pending);

  // Parents: the fittest of the best population_size completed observations (ties by trial
  // order, so the order is total and replays exactly).
  const std::vector<double> objectives = FiniteObjectives(completed);
  std::vector<size_t> order(completed.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return objectives[a] < objectives[b]; });
  const size_t population = std::min<size_t>(order.size(), options_.population_size);
  const size_t parents = std::min(
      population, std::max<size_t>(2, static_cast<size_t>(std::lround(options_.fit_fraction *
                                                                      options_.population_size))));

  std::vector<Assignment> suggestions;
  const size_t history = completed.size() + pending.size();
  for (int k = 0; k < count; ++k) {
    const bool random_phase =
        history + k < static_cast<size_t>(options_.population_size) || parents < 2;
    Eigen::VectorXd child;
    for (int attempt = 0; attempt < kAttemptsForNewPoint; ++attempt) {
      if (random_phase) {
        child = cube.Project(cube.Sample(random));
      } else {
        const size_t first = random.Below(parents);
        size_t second = random.Below(parents - 1);
        if (second >= first) ++second;
        const Eigen::VectorXd& a = taken[order[first]];
        const Eigen::VectorXd& b = taken[order[second]];
        const double t = random.Uniform();
        child = a + t * (b - a);
        for (int i = 0; i < space.size(); ++i) {
          const Parameter& parameter = space.parameters()[i];
          const int offset = cube.offset(i);
          if (parameter.kind == ParameterKind::kCategorical) {
            if (random.Uniform() < options_.mutation_stddev) {
              child.segment(offset, parameter.choices.size()).setZero();
              child[offset + random.Below(parameter.choices.size())] = 1.0;
            }
          } else {
            child[offset] =
                std::clamp(child[offset] + options_.mutation_stddev * random.Normal(), 0.0, 1.0);
          }
        }
        child = cube.Project(child);
      }
      if (!ContainsPoint(taken, child)) break;
    }
    taken.push_back(child);
    suggestions.push_back(cube.Decode(child));
  }
  return suggestions;
}

}  // namespace gantry::studies
