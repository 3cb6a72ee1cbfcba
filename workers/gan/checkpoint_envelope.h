// CheckpointEnvelope: the torch-free outer layer of a checkpoint file (a three-line text header
// with the payload's SHA-256 and size, then the payload), parsed and verified without LibTorch.
#ifndef GANTRY_WORKERS_GAN_CHECKPOINT_ENVELOPE_H_
#define GANTRY_WORKERS_GAN_CHECKPOINT_ENVELOPE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::gan {

// The first header line of every checkpoint.
inline constexpr char kCheckpointMagic[] = "GANTRY-CHECKPOINT 1";

// Splits `file_bytes` (a whole checkpoint file) into header and payload and verifies the header:
// "GANTRY-CHECKPOINT 1\nsha256 <64 hex>\nbytes <decimal>\n<payload>". Returns a view into
// `file_bytes` (valid as long as it is) of the payload whose size and SHA-256 match the header.
// `name` only labels error messages. Errors: INVALID_ARGUMENT (not a gantry checkpoint); DATA_LOSS
// (damaged header, truncated or padded payload, sha256 mismatch). Pure function, thread-safe.
absl::StatusOr<absl::string_view> ParseCheckpointEnvelope(absl::string_view file_bytes,
                                                          absl::string_view name);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_CHECKPOINT_ENVELOPE_H_
