#include "studies/search_history.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "studies/random_source.h"

namespace gantry::studies {

absl::Status CheckSuggestArguments(const SearchSpace& space,
                                   absl::Span<const Observation> completed,
                                   absl::Span<const Assignment> pending, int count) {
  if (absl::Status status = space.Validate(); !status.ok()) return status;
  if (count < 1 || count > kMaxSuggestions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "asked for ", count, " suggestions: ask for 1 to ", kMaxSuggestions, " at a time"));
  }
  for (size_t i = 0; i < completed.size(); ++i) {
    if (absl::Status status = space.CheckAssignment(completed[i].assignment); !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("completed observation ", i, ": ", status.message()));
    }
    const std::optional<double>& stddev = completed[i].stddev;
    if (stddev.has_value() && !(std::isfinite(*stddev) && *stddev >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("completed observation ", i, ": stddev ",
                                                     *stddev, " must be finite and >= 0"));
    }
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    if (absl::Status status = space.CheckAssignment(pending[i]); !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pending assignment ", i, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

uint64_t SuggestSeed(uint64_t seed, size_t completed, size_t pending) {
  return RandomSource::Mix(RandomSource::Mix(seed, completed), pending);
}

std::vector<double> FiniteObjectives(absl::Span<const Observation> completed) {
  double worst = -std::numeric_limits<double>::infinity();
  for (const Observation& observation : completed) {
    if (std::isfinite(observation.objective)) worst = std::max(worst, observation.objective);
  }
  if (!std::isfinite(worst)) worst = 0;
  std::vector<double> objectives;
  objectives.reserve(completed.size());
  for (const Observation& observation : completed) {
    objectives.push_back(std::isfinite(observation.objective) ? observation.objective : worst);
  }
  return objectives;
}

std::vector<Eigen::VectorXd> EncodeHistory(const UnitCube& cube,
                                           absl::Span<const Observation> completed,
                                           absl::Span<const Assignment> pending) {
  std::vector<Eigen::VectorXd> points;
  points.reserve(completed.size() + pending.size());
  for (const Observation& observation : completed) {
    points.push_back(cube.Encode(observation.assignment));
  }
  for (const Assignment& assignment : pending) points.push_back(cube.Encode(assignment));
  return points;
}

bool ContainsPoint(const std::vector<Eigen::VectorXd>& points, const Eigen::VectorXd& point) {
  for (const Eigen::VectorXd& other : points) {
    if ((other - point).cwiseAbs().maxCoeff() <= 1e-12) return true;
  }
  return false;
}

}  // namespace gantry::studies
