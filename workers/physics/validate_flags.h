// ValidateFlags: the command line of gantry-validate (its flag values and file arguments) and
// BuildValidateCommand, which validates it into a ValidateCommand (pure, unit-testable).
#ifndef GANTRY_WORKERS_PHYSICS_VALIDATE_FLAGS_H_
#define GANTRY_WORKERS_PHYSICS_VALIDATE_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "workers/physics/validation.h"

namespace gantry::physics {

// One member per flag (unset = not given) and the positional file arguments.
struct ValidateFlags {
  bool summary = false;
  std::optional<std::string> energies;  // GeV,... bin centres
  std::optional<double> half_width;     // GeV around each centre
  std::optional<std::string> edges;     // GeV,... bin edges
  std::optional<std::string> theta;     // deg,... angle bin centres
  std::string json;                     // report file; empty = none
  std::string floor_reference;          // a second MC file for the field metrics' floors
  bool field_metrics = true;            // false: no classifier, Frechet distance, ...
  std::optional<int> classifier_seeds;  // seeds per classifier two-sample test
  std::vector<std::string> files;       // reference.h5 generated.h5
};

// What gantry-validate runs: the metrics report (options) or, with summary, the side-by-side
// summary of both files.
struct ValidateCommand {
  bool summary = false;
  std::string reference;
  std::string generated;
  std::string floor_reference;  // empty: the reference's halves give the floors
  std::string json;
  ValidationOptions options;
};

// INVALID_ARGUMENT naming the flag for a list that is not numbers, classifier seeds outside 1..20,
// a binning or field-metrics flag given with --summary, and a file count other than two (the
// message starts with "usage").
absl::StatusOr<ValidateCommand> BuildValidateCommand(const ValidateFlags& flags);

}  // namespace gantry::physics

#endif  // GANTRY_WORKERS_PHYSICS_VALIDATE_FLAGS_H_
