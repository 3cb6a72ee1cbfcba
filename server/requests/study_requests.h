// Study requests: the checks of StudyService requests, the search parameters a study may vary
// (JobSpec field paths) and how a trial's values are written into its job spec.
#ifndef GANTRY_SERVER_REQUESTS_STUDY_REQUESTS_H_
#define GANTRY_SERVER_REQUESTS_STUDY_REQUESTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/studies.pb.h"
#include "gantry/v1/training.pb.h"
#include "studies/search_space.h"
#include "studies/study_types.h"

namespace gantry::server {

inline constexpr int kMaxStudyTrials = 1000;
inline constexpr int kMaxStudyParameters = 32;

// The JobSpec field paths a study may search over, sorted ("hyper_parameters.learning_rate", ...).
std::vector<std::string> StudyParameterNames();

// Writes `value` into the field `name` of `spec`. INVALID_ARGUMENT for an unknown name or a value
// of the wrong type (a categorical choice that is not a number of the field's type included).
absl::Status ApplyParameter(const std::string& name, const gantry::v1::ParameterValue& value,
                            gantry::v1::JobSpec* spec);

// Everything CreateStudy can check without the database: names, kinds and ranges of the
// parameters (each bound applied to the base job must give a valid job), objective, algorithm,
// budget, folds, early stopping. INVALID_ARGUMENT names the field ("spec.parameters[1].max", ...)
// and says what to change. The base job itself is checked by the caller (JobSubmitter::Check).
absl::Status ValidateStudySpec(const gantry::v1::StudySpec& spec);
// A JobSpec check's error as the study's: "spec.<field>: ..." becomes "spec.base_job.<field>: ..."
// and "spec.data_split.folds: ..." becomes "spec.folds: ..." (the study sets the data split).
absl::Status UnderBaseJob(const absl::Status& status);
absl::Status ValidateListStudies(const gantry::v1::ListStudiesRequest& request);

// The search library's view of a study and back.
studies::SearchSpace SearchSpaceOf(const gantry::v1::StudySpec& spec);
studies::Assignment AssignmentOf(
    const google::protobuf::Map<std::string, gantry::v1::ParameterValue>& parameters);
google::protobuf::Map<std::string, gantry::v1::ParameterValue> ParametersOf(
    const studies::Assignment& assignment);
// "name=value, ..." for messages and listings.
std::string FormatParameters(
    const google::protobuf::Map<std::string, gantry::v1::ParameterValue>& parameters);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_REQUESTS_STUDY_REQUESTS_H_
