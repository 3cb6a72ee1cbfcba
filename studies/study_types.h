// Plain value types of the study search library: parameters, assignments, observations and
// intermediate values. Pure data; SearchSpace (search_space.h) gives them meaning.
#ifndef GANTRY_STUDIES_STUDY_TYPES_H_
#define GANTRY_STUDIES_STUDY_TYPES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::studies {

// How a parameter is searched and which value type it takes in an Assignment.
enum class ParameterKind {
  kContinuous,     // double in [low, high], searched uniformly
  kLogContinuous,  // double in [low, high], 0 < low, searched uniformly in log(value)
  kInteger,        // int64 in [low, high], both bounds integral
  kCategorical,    // one of `choices` (strings)
};

// "continuous", "log-continuous", "integer", "categorical".
absl::string_view ParameterKindName(ParameterKind kind);
// The inverse of ParameterKindName; INVALID_ARGUMENT listing the accepted names otherwise.
absl::StatusOr<ParameterKind> ParseParameterKind(absl::string_view name);

// One dimension of a search space. `low`/`high` are used by the numeric kinds, `choices` by
// categorical parameters only.
struct Parameter {
  std::string name;
  ParameterKind kind = ParameterKind::kContinuous;
  double low = 0;
  double high = 0;
  std::vector<std::string> choices;
};

// A parameter's value: double for continuous and log-continuous, int64 for integer, string for
// categorical parameters.
using ParameterValue = std::variant<double, int64_t, std::string>;

// One point of a search space: parameter name -> value. Ordered, so iteration and formatting are
// deterministic.
using Assignment = std::map<std::string, ParameterValue>;

// A value as text that ParseParameterValue reads back exactly: doubles with 17 significant
// digits ("0.001", "1e-05"), integers in decimal, strings as they are.
std::string FormatParameterValue(const ParameterValue& value);

// "name=value,name=value" in name order (FormatParameterValue for each value). Names and choices
// never hold ',' or '=' (SearchSpace::Validate), so SearchSpace::ParseAssignment reads it back.
std::string FormatAssignment(const Assignment& assignment);

// A completed trial: where it ran and what it scored. The objective is always minimised (the
// caller negates a metric it maximises). A non-finite objective (a diverged training) counts as
// worse than every finite one. `stddev` is the standard deviation of the objective's estimate
// (e.g. the spread of K folds over sqrt(K)) when known; the Gaussian process adds its square to
// that observation's noise.
struct Observation {
  Assignment assignment;
  double objective = 0;
  std::optional<double> stddev;
};

// A value a running trial reported at a training step (e.g. the validation figure of merit at a
// checkpoint), minimised like Observation::objective.
struct IntermediateValue {
  int64_t step = 0;
  double value = 0;
};

}  // namespace gantry::studies

#endif  // GANTRY_STUDIES_STUDY_TYPES_H_
