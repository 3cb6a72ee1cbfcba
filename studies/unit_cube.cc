#include "studies/unit_cube.h"

#include <algorithm>
#include <cmath>

namespace gantry::studies {
namespace {

double Clip01(double x) { return std::isfinite(x) ? std::clamp(x, 0.0, 1.0) : 0.5; }

}  // namespace

UnitCube::UnitCube(const SearchSpace& space) : space_(space) {
  for (const Parameter& parameter : space.parameters()) {
    offsets_.push_back(dimensions_);
    dimensions_ += parameter.kind == ParameterKind::kCategorical
                       ? static_cast<int>(parameter.choices.size())
                       : 1;
  }
}

Eigen::VectorXd UnitCube::Encode(const Assignment& assignment) const {
  Eigen::VectorXd point = Eigen::VectorXd::Zero(dimensions_);
  for (int i = 0; i < space_.size(); ++i) {
    const Parameter& parameter = space_.parameters()[i];
    const ParameterValue& value = assignment.at(parameter.name);
    double& x = point[offsets_[i]];
    switch (parameter.kind) {
      case ParameterKind::kContinuous:
        x = (std::get<double>(value) - parameter.low) / (parameter.high - parameter.low);
        break;
      case ParameterKind::kLogContinuous:
        x = (std::log(std::get<double>(value)) - std::log(parameter.low)) /
            (std::log(parameter.high) - std::log(parameter.low));
        break;
      case ParameterKind::kInteger:
        x = (static_cast<double>(std::get<int64_t>(value)) - parameter.low + 0.5) /
            (parameter.high - parameter.low + 1);
        break;
      case ParameterKind::kCategorical: {
        const auto& choices = parameter.choices;
        const auto found = std::find(choices.begin(), choices.end(), std::get<std::string>(value));
        point[offsets_[i] + (found - choices.begin())] = 1.0;
        break;
      }
    }
    point[offsets_[i]] = Clip01(point[offsets_[i]]);
  }
  return point;
}

Assignment UnitCube::Decode(const Eigen::VectorXd& point) const {
  Assignment assignment;
  for (int i = 0; i < space_.size(); ++i) {
    const Parameter& parameter = space_.parameters()[i];
    const double x = Clip01(point[offsets_[i]]);
    switch (parameter.kind) {
      case ParameterKind::kContinuous:
        assignment[parameter.name] = std::clamp(
            parameter.low + x * (parameter.high - parameter.low), parameter.low, parameter.high);
        break;
      case ParameterKind::kLogContinuous: {
        const double log_low = std::log(parameter.low);
        assignment[parameter.name] =
            std::clamp(std::exp(log_low + x * (std::log(parameter.high) - log_low)), parameter.low,
                       parameter.high);
        break;
      }
      case ParameterKind::kInteger: {
        const double cells = parameter.high - parameter.low + 1;
        const double integer = std::min(parameter.low + std::floor(x * cells), parameter.high);
        assignment[parameter.name] = static_cast<int64_t>(integer);
        break;
      }
      case ParameterKind::kCategorical: {
        int best = 0;
        for (int c = 1; c < static_cast<int>(parameter.choices.size()); ++c) {
          if (Clip01(point[offsets_[i] + c]) > Clip01(point[offsets_[i] + best])) best = c;
        }
        assignment[parameter.name] = parameter.choices[best];
        break;
      }
    }
  }
  return assignment;
}

Eigen::VectorXd UnitCube::Sample(RandomSource& random) const {
  Eigen::VectorXd point(dimensions_);
  for (int d = 0; d < dimensions_; ++d) point[d] = random.Uniform();
  return point;
}

}  // namespace gantry::studies
