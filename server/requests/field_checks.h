// Field checks: the limits and the syntax checks every service's request checks share (names,
// ids, labels, pages, model and dataset references). Each failure is INVALID_ARGUMENT with a
// message that names the field and says what to change; existence checks belong to the services.
#ifndef GANTRY_SERVER_REQUESTS_FIELD_CHECKS_H_
#define GANTRY_SERVER_REQUESTS_FIELD_CHECKS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/field_checks.h"
#include "gantry/v1/common.pb.h"
#include "jobspec/job_plan.h"
#include "google/protobuf/map.h"

namespace gantry::server {

// Limits the server enforces; documented in docs/API.md.
inline constexpr int kDefaultPageSize = 50;
inline constexpr int kMaxPageSize = 1000;
inline constexpr int kMaxWorldSize = 256;
inline constexpr int kMaxBatchPerRank = jobspec::kMaxBatchPerRank;
inline constexpr int kMaxEpochs = jobspec::kMaxEpochs;
inline constexpr int kMaxLabels = 64;
inline constexpr int kMaxChunkShowers = 1024;
// GenerateRequest.priority is 0..kMaxPriority (a worker caps it at its model's levels - 1).
inline constexpr int kMaxPriority = 9;
inline constexpr int kMaxLogTail = 10000;
inline constexpr int kMaxFolds = jobspec::kMaxFolds;  // JobSpec.data_split.folds, StudySpec.folds
inline constexpr int64_t kMaxUploadChunkBytes = 4 << 20;  // 4 MiB, as datasets.proto says

// A parsed model reference: "[owner/]name:version" (version > 0) or "[owner/]name@alias".
struct ModelRef {
  std::string owner;  // empty unless qualified
  std::string name;
  int32_t version = 0;  // 0 when an alias is given
  std::string alias;
};

// Which kind of training data a JobSpec.dataset names.
enum class DatasetRefKind { kUploaded, kToyMc, kFile };

absl::StatusOr<ModelRef> ParseModelRef(absl::string_view ref, absl::string_view field);
// Checks the syntax of a dataset reference; `field` names it in messages.
absl::StatusOr<DatasetRefKind> ValidateDatasetRef(absl::string_view ref, absl::string_view preset,
                                                  absl::string_view field);

absl::Status ValidateModelName(absl::string_view name, absl::string_view field);
absl::Status ValidateAlias(absl::string_view alias, absl::string_view field);
absl::Status ValidateTenantName(absl::string_view name, absl::string_view field);
absl::Status ValidateDatasetName(absl::string_view name, absl::string_view field);
absl::Status ValidateLabels(const google::protobuf::Map<std::string, std::string>& labels,
                            absl::string_view field);
absl::Status ValidateSha256(absl::string_view hex, absl::string_view field);
// "job-..." / "ds-..." identifiers: required, the prefix, then [A-Za-z0-9-]{1,64}.
absl::Status ValidateId(absl::string_view id, absl::string_view prefix, absl::string_view field);
// Returns the effective page size (0 -> default); negative or > kMaxPageSize is INVALID_ARGUMENT.
absl::StatusOr<int> ValidatePage(const gantry::v1::PageRequest& page, absl::string_view field);
absl::Status ValidateDescription(absl::string_view description, absl::string_view field);

// Building blocks of the per-service request checks (base/field_checks.h), and the particle.
namespace checks {
using ::gantry::checks::AllChars;
using ::gantry::checks::CheckFinite;
using ::gantry::checks::CheckInt;
using ::gantry::checks::CheckRange01;
using ::gantry::checks::Invalid;
using ::gantry::checks::kReasonInvalidField;
using ::gantry::checks::Sub;
absl::Status CheckParticle(gantry::v1::Particle particle, absl::string_view field);
}  // namespace checks

}  // namespace gantry::server

#endif  // GANTRY_SERVER_REQUESTS_FIELD_CHECKS_H_
