#include "studies/grid_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "studies/search_history.h"

namespace gantry::studies {
namespace {

// Whether two values of one axis are the same grid value (doubles to a relative 1e-9, so values
// that went through a text or database round trip still match).
bool SameValue(const ParameterValue& a, const ParameterValue& b) {
  if (a.index() != b.index()) return false;
  if (const double* x = std::get_if<double>(&a)) {
    const double y = std::get<double>(b);
    return std::abs(*x - y) <= 1e-9 * std::max({1.0, std::abs(*x), std::abs(y)});
  }
  return a == b;
}

// The grid index of an assignment, or -1 when it is not a grid point.
int64_t GridIndex(const std::vector<std::vector<ParameterValue>>& axes, const SearchSpace& space,
                  const Assignment& assignment) {
  int64_t index = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    const ParameterValue& value = assignment.at(space.parameters()[i].name);
    int64_t position = -1;
    for (size_t k = 0; k < axes[i].size(); ++k) {
      if (SameValue(axes[i][k], value)) {
        position = static_cast<int64_t>(k);
        break;
      }
    }
    if (position < 0) return -1;
    index = index * static_cast<int64_t>(axes[i].size()) + position;
  }
  return index;
}

}  // namespace

std::vector<std::vector<ParameterValue>> GridSearch::Axes(const SearchSpace& space) const {
  std::vector<std::vector<ParameterValue>> axes;
  for (const Parameter& parameter : space.parameters()) {
    std::vector<ParameterValue> values;
    const int n = points_per_axis_;
    switch (parameter.kind) {
      case ParameterKind::kContinuous:
        for (int k = 0; k < n; ++k) {
          values.push_back(k == n - 1
                               ? parameter.high
                               : parameter.low + (parameter.high - parameter.low) * k / (n - 1));
        }
        break;
      case ParameterKind::kLogContinuous: {
        const double log_low = std::log(parameter.low), log_high = std::log(parameter.high);
        for (int k = 0; k < n; ++k) {
          values.push_back(k == 0       ? parameter.low
                           : k == n - 1 ? parameter.high
                                        : std::exp(log_low + (log_high - log_low) * k / (n - 1)));
        }
        break;
      }
      case ParameterKind::kInteger: {
        std::set<int64_t> integers;
        if (parameter.high - parameter.low + 1 <= n) {
          for (double v = parameter.low; v <= parameter.high; ++v) {
            integers.insert(static_cast<int64_t>(v));
          }
        } else {
          for (int k = 0; k < n; ++k) {
            integers.insert(static_cast<int64_t>(
                std::llround(parameter.low + (parameter.high - parameter.low) * k / (n - 1))));
          }
        }
        values.assign(integers.begin(), integers.end());
        break;
      }
      case ParameterKind::kCategorical:
        values.assign(parameter.choices.begin(), parameter.choices.end());
        break;
    }
    // Clip what rounding pushed out of the range and drop values that match an earlier one (a
    // very narrow range), so every grid point is a distinct, valid assignment.
    std::vector<ParameterValue> distinct;
    for (ParameterValue& value : values) {
      if (double* number = std::get_if<double>(&value)) {
        *number = std::clamp(*number, parameter.low, parameter.high);
      }
      const bool seen = std::any_of(distinct.begin(), distinct.end(),
                                    [&](const ParameterValue& v) { return SameValue(v, value); });
      if (!seen) distinct.push_back(std::move(value));
    }
    axes.push_back(std::move(distinct));
  }
  return axes;
}

int64_t GridSearch::PointCount(const SearchSpace& space) const {
  int64_t count = 1;
  for (const auto& axis : Axes(space)) {
    const int64_t size = static_cast<int64_t>(axis.size());
    if (count > std::numeric_limits<int64_t>::max() / size) {
      return std::numeric_limits<int64_t>::max();
    }
    count *= size;
  }
  return count;
}

absl::Status GridSearch::CheckBudget(const SearchSpace& space, int64_t max_trials) const {
  if (absl::Status status = Optimizer::CheckBudget(space, max_trials); !status.ok()) {
    return status;
  }
  const int64_t points = PointCount(space);
  if (max_trials > points) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the grid has ", points, " points (", points_per_axis_,
        " per continuous axis) but the budget asks for ", max_trials,
        " trials: lower max trials to at most ", points, " or raise the points per axis"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Assignment>> GridSearch::Suggest(const SearchSpace& space,
                                                            absl::Span<const Observation> completed,
                                                            absl::Span<const Assignment> pending,
                                                            int count, uint64_t /*seed*/) const {
  if (absl::Status status = CheckSuggestArguments(space, completed, pending, count); !status.ok()) {
    return status;
  }
  const std::vector<std::vector<ParameterValue>> axes = Axes(space);
  const int64_t points = PointCount(space);
  std::set<int64_t> taken;
  for (const Observation& observation : completed) {
    taken.insert(GridIndex(axes, space, observation.assignment));
  }
  for (const Assignment& assignment : pending) taken.insert(GridIndex(axes, space, assignment));

  std::vector<Assignment> suggestions;
  // At most taken.size() indices are skipped, so this loop is short even on a huge grid.
  for (int64_t index = 0; index < points && static_cast<int>(suggestions.size()) < count; ++index) {
    if (taken.count(index) > 0) continue;
    Assignment assignment;
    int64_t rest = index;
    for (int i = static_cast<int>(axes.size()) - 1; i >= 0; --i) {
      const int64_t size = static_cast<int64_t>(axes[i].size());
      assignment[space.parameters()[i].name] = axes[i][rest % size];
      rest /= size;
    }
    suggestions.push_back(std::move(assignment));
  }
  if (suggestions.empty()) {
    return absl::OutOfRangeError(
        absl::StrCat("every one of the grid's ", points, " points has been tried"));
  }
  return suggestions;
}

}  // namespace gantry::studies
