// job_spec_builder: builds the JobSpec of `gantry jobs submit` from a JSON spec file and/or flags.
#ifndef GANTRY_CLIENTS_CLI_JOB_SPEC_BUILDER_H_
#define GANTRY_CLIENTS_CLI_JOB_SPEC_BUILDER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "clients/cli/arg_parser.h"
#include "gantry/v1/training.pb.h"

namespace gantry::cli {

// The flags `jobs submit` accepts for JobSpec fields (plus --spec).
std::vector<FlagSpec> JobSpecFlags();

// Reads a file's contents (injectable for tests).
using FileReader = std::function<absl::StatusOr<std::string>(const std::string& path)>;

// Starts from --spec (protobuf JSON of a JobSpec; unknown fields are an error) when given, then
// applies every flag on top. Bad values are usage errors naming the flag, e.g.
// "--epochs: 'ten' is not an integer". Ranges are checked by the server.
absl::StatusOr<v1::JobSpec> BuildJobSpec(const ParsedArgs& args, const FileReader& read_file);

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_JOB_SPEC_BUILDER_H_
