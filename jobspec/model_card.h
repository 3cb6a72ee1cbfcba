// The model card: what a detector simulation needs to use an exported generator correctly, as JSON
// with a versioned schema (its keys: ModelVersion.model_card_json in proto/gantry/v1/catalog.proto).
// Built from the registry entry (GetModel) and the export's metadata; torch-free, shared by every
// client that writes one.
#ifndef GANTRY_JOBSPEC_MODEL_CARD_H_
#define GANTRY_JOBSPEC_MODEL_CARD_H_

#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/catalog.pb.h"

namespace gantry::jobspec {

// The schema this code writes; a reader refuses a major version it does not know.
inline constexpr char kModelCardSchema[] = "gantry.model_card/1";

// The card of `model` exported as `exported` (its metadata chunk, with the file's size and SHA-256
// as the client verified them) into a file named `file_name` (no folder). Keys are in a fixed order
// and every number is printed exactly, so a card is byte-identical for the same inputs.
// INVALID_ARGUMENT when the two do not describe one export of one model (the metadata names another
// version or checkpoint, has no `shower` output or no `latent` input).
absl::StatusOr<std::string> ModelCardJson(const gantry::v1::ModelVersion& model,
                                          const gantry::v1::ExportMetadata& exported,
                                          const std::string& file_name);

// The card of the registry entry alone (GetModel): the gantry profile's interface from
// model.generator(), "file": null. FAILED_PRECONDITION when the entry has no recorded generator
// interface (baselines; versions registered before interfaces were recorded).
absl::StatusOr<std::string> RegistryModelCardJson(const gantry::v1::ModelVersion& model);

}  // namespace gantry::jobspec

#endif  // GANTRY_JOBSPEC_MODEL_CARD_H_
