// Validation: syntax and range checks of every gantry.v1 request, before anything touches storage.
// Each failure is INVALID_ARGUMENT (or RESOURCE_EXHAUSTED for over-size requests) with a message
// that names the field and says what to change. Existence checks (a dataset, a model) belong to the
// services.
#ifndef GANTRY_SERVER_VALIDATION_H_
#define GANTRY_SERVER_VALIDATION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gantry/v1/admin.pb.h"
#include "gantry/v1/catalog.pb.h"
#include "gantry/v1/datasets.pb.h"
#include "gantry/v1/generation.pb.h"
#include "gantry/v1/training.pb.h"
#include "gantry/v1/worker.pb.h"
#include "google/protobuf/map.h"

namespace gantry::server {

// Limits the server enforces; documented in docs/API.md.
inline constexpr int kDefaultPageSize = 50;
inline constexpr int kMaxPageSize = 1000;
inline constexpr int kMaxWorldSize = 256;
inline constexpr int kMaxBatchPerRank = 4096;
inline constexpr int kMaxEpochs = 10000;
inline constexpr int kMaxLabels = 64;
// The default of gantry-server --max-showers-per-request (a server option, not a constant).
inline constexpr int64_t kDefaultMaxShowersPerRequest = 1000000;
inline constexpr int kMaxChunkShowers = 1024;
inline constexpr int kMaxLogTail = 10000;
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

absl::Status ValidateJobSpec(const gantry::v1::JobSpec& spec);
absl::Status ValidateListJobs(const gantry::v1::ListJobsRequest& request);
absl::Status ValidateGetJobLogs(const gantry::v1::GetJobLogsRequest& request);

// Checks a generation request on its own (syntax, finiteness, counts). More than `max_showers`
// showers is RESOURCE_EXHAUSTED naming the limit.
absl::Status ValidateGenerateRequest(const gantry::v1::GenerateRequest& request,
                                     int64_t max_showers = kDefaultMaxShowersPerRequest);
// Checks it against the resolved model: status, particle, energy and angle inside the training
// ranges.
absl::Status ValidateGenerateForModel(const gantry::v1::GenerateRequest& request,
                                      const gantry::v1::ModelVersion& model);

absl::Status ValidateListModels(const gantry::v1::ListModelsRequest& request);
absl::Status ValidateSetTags(const gantry::v1::SetTagsRequest& request);

// `max_bytes` is the server's dataset size limit (RESOURCE_EXHAUSTED above it).
absl::Status ValidateUploadHeader(const gantry::v1::UploadDatasetHeader& header, int64_t max_bytes);

absl::Status ValidateRegister(const gantry::v1::RegisterRequest& request);
absl::Status ValidateCheckpointHeader(const gantry::v1::CheckpointHeader& header,
                                      int64_t max_bytes);

absl::Status ValidateDescription(absl::string_view description, absl::string_view field);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_VALIDATION_H_
