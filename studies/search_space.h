// A SearchSpace is the set of parameters a study searches over, with the checks and the text form
// of the assignments drawn from it.
#ifndef GANTRY_STUDIES_SEARCH_SPACE_H_
#define GANTRY_STUDIES_SEARCH_SPACE_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "studies/study_types.h"

namespace gantry::studies {

class SearchSpace {
 public:
  // Bounds that keep a tenant's space (and the grid, and the Gaussian process' one-hot inputs)
  // small.
  static constexpr size_t kMaxParameters = 64;
  static constexpr size_t kMaxChoices = 256;

  SearchSpace() = default;
  explicit SearchSpace(std::vector<Parameter> parameters) : parameters_(std::move(parameters)) {}

  // INVALID_ARGUMENT naming the parameter and saying what to change for: no parameters or more
  // than kMaxParameters; an empty or badly formed name (letters, digits, '_', '.', '-' and '/'
  // only) or a duplicate one; non-finite bounds or width, low >= high, low <= 0 for
  // log-continuous, non-integral integer bounds, choices given to a numeric kind; for
  // categoricals no choices, more than kMaxChoices, an empty or duplicate choice, or one holding
  // ',', '=' or a control character.
  absl::Status Validate() const;

  const std::vector<Parameter>& parameters() const { return parameters_; }
  int size() const { return static_cast<int>(parameters_.size()); }
  // nullptr when no parameter has that name.
  const Parameter* Find(absl::string_view name) const;

  // OK when `assignment` names every parameter exactly once with a value of the parameter's type
  // inside its range (or among its choices); INVALID_ARGUMENT naming the offending parameter
  // otherwise (unknown names included).
  absl::Status CheckAssignment(const Assignment& assignment) const;

  // Reads one value for parameter `name` from text (FormatParameterValue's form); the value must
  // lie in the parameter's range. INVALID_ARGUMENT for an unknown name or a bad value.
  absl::StatusOr<ParameterValue> ParseValue(absl::string_view name, absl::string_view text) const;

  // Reads FormatAssignment's "name=value,..." form and checks it with CheckAssignment.
  absl::StatusOr<Assignment> ParseAssignment(absl::string_view text) const;

 private:
  std::vector<Parameter> parameters_;
};

}  // namespace gantry::studies

#endif  // GANTRY_STUDIES_SEARCH_SPACE_H_
