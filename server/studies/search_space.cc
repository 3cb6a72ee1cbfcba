#include "server/studies/search_space.h"

namespace gantry::studies {

absl::Status SearchSpace::Validate() const {
  return absl::UnimplementedError("SearchSpace::Validate: not implemented yet");
}

const Parameter* SearchSpace::Find(std::string_view name) const {
  for (const Parameter& parameter : parameters_) {
    if (parameter.name == name) return &parameter;
  }
  return nullptr;
}

absl::Status SearchSpace::CheckAssignment(const Assignment&) const {
  return absl::UnimplementedError("SearchSpace::CheckAssignment: not implemented yet");
}

absl::StatusOr<ParameterValue> SearchSpace::ParseValue(std::string_view, std::string_view) const {
  return absl::UnimplementedError("SearchSpace::ParseValue: not implemented yet");
}

absl::StatusOr<Assignment> SearchSpace::ParseAssignment(std::string_view) const {
  return absl::UnimplementedError("SearchSpace::ParseAssignment: not implemented yet");
}

}  // namespace gantry::studies
