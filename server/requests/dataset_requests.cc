#include "server/requests/dataset_requests.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

using checks::CheckParticle;
using checks::Invalid;

}  // namespace

absl::Status ValidateUploadHeader(const v1::UploadDatasetHeader& header, int64_t max_bytes) {
  RETURN_IF_ERROR(ValidateDatasetName(header.name(), "header.name"));
  if (header.size_bytes() <= 0) {
    return Invalid("header.size_bytes",
                   absl::StrCat("is ", header.size_bytes(), "; give the file's size in bytes"));
  }
  if (header.size_bytes() > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("header.size_bytes: ", header.size_bytes(),
                     " bytes exceeds the server's dataset limit of ", max_bytes, " bytes"));
  }
  if (!header.sha256().empty()) RETURN_IF_ERROR(ValidateSha256(header.sha256(), "header.sha256"));
  RETURN_IF_ERROR(CheckParticle(header.particle(), "header.particle"));
  if (header.file_name().size() > 255 || header.file_name().find('/') != std::string::npos) {
    return Invalid("header.file_name", "must be a base name (no '/') of at most 255 characters");
  }
  return ValidateLabels(header.labels(), "header.labels");
}

}  // namespace gantry::server
