// libFuzzer target: the CLI's JobSpec from JSON (`gantry jobs submit --spec FILE`: protobuf JSON
// parsing in clients/cli BuildJobSpec), then the server's check of the spec it produced
// (ValidateJobSpec), as a submitted job goes through both.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "clients/cli/arg_parser.h"
#include "clients/cli/job_spec_builder.h"
#include "server/requests/training_requests.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  gantry::cli::ParsedArgs args;
  args.AddFlag("spec", "fuzz.json");
  absl::StatusOr<gantry::v1::JobSpec> spec = gantry::cli::BuildJobSpec(
      args, [&json](const std::string&) -> absl::StatusOr<std::string> { return json; });
  if (!spec.ok()) {
    FUZZ_CHECK(!spec.status().message().empty(), "an error must say what is wrong");
    return 0;
  }
  const absl::Status valid = gantry::server::ValidateJobSpec(*spec);
  if (!valid.ok()) {
    FUZZ_CHECK(valid.code() == absl::StatusCode::kInvalidArgument,
               "a bad spec is INVALID_ARGUMENT");
  }
  return 0;
}
