// Catalog requests: the checks of CatalogService listings, tag updates, UpdateModel and
// ExportModel.
#ifndef GANTRY_SERVER_REQUESTS_CATALOG_REQUESTS_H_
#define GANTRY_SERVER_REQUESTS_CATALOG_REQUESTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gantry/v1/catalog.pb.h"
#include "server/requests/field_checks.h"

namespace gantry::server {

absl::Status ValidateListModels(const gantry::v1::ListModelsRequest& request);
absl::Status ValidateSetTags(const gantry::v1::SetTagsRequest& request);
// The reference, the update mask (paths "description", "visibility", "tags", each at most once, at
// least one) and the values of the fields it names; fields outside the mask are not looked at.
absl::Status ValidateUpdateModel(const gantry::v1::UpdateModelRequest& request);
// The model reference ("name:version" or "name@alias"), the format (an unspecified or unknown one
// is INVALID_ARGUMENT naming the three) and a profile the format writes.
absl::Status ValidateExportModel(const gantry::v1::ExportModelRequest& request);
// The request's profile against the resolved `model`: FAILED_PRECONDITION, naming the version and
// the profiles that fit, when it cannot represent the model's angle input (the generator interface
// the rank recorded; for older versions, an angle range as Generate reads it).
absl::Status ValidateExportForModel(const gantry::v1::ExportModelRequest& request,
                                    const gantry::v1::ModelVersion& model);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_REQUESTS_CATALOG_REQUESTS_H_
