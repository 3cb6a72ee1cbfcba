// CheckpointEnvelope: the torch-free outer layer of a checkpoint file (a three-line text header
// with the payload's SHA-256 and size, then the payload), parsed and verified without LibTorch,
// and the kind of model its payload holds (networks or a no-network baseline).
#ifndef GANTRY_WORKERS_GAN_CHECKPOINT_ENVELOPE_H_
#define GANTRY_WORKERS_GAN_CHECKPOINT_ENVELOPE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::gan {

// The first header line of every checkpoint.
inline constexpr char kCheckpointMagic[] = "GANTRY-CHECKPOINT 1";

// What a checkpoint's payload holds: a torch archive of the 3DGAN networks
// (workers/gan/checkpoint.h) or a no-network baseline (workers/baseline/baseline_checkpoint.h),
// whose payload starts with kBaselinePayloadMagic.
enum class CheckpointKind { kNetworks, kBaseline };
inline constexpr char kBaselinePayloadMagic[] = "GANTRY-BASELINE 1\n";

// The kind of a payload, by its first bytes (not a validation of the payload).
CheckpointKind CheckpointKindOfPayload(absl::string_view payload);

// The kind of the checkpoint file at `path`, from its header and the first bytes of its payload,
// without reading the rest: NOT_FOUND (no file) and INVALID_ARGUMENT (not a gantry checkpoint);
// the full readers verify size and SHA-256.
absl::StatusOr<CheckpointKind> PeekCheckpointKind(const std::string& path);

// Splits `file_bytes` (a whole checkpoint file) into header and payload and verifies the header:
// "GANTRY-CHECKPOINT 1\nsha256 <64 hex>\nbytes <decimal>\n<payload>". Returns a view into
// `file_bytes` (valid as long as it is) of the payload whose size and SHA-256 match the header.
// `name` only labels error messages. Errors: INVALID_ARGUMENT (not a gantry checkpoint); DATA_LOSS
// (damaged header, truncated or padded payload, sha256 mismatch). Pure function, thread-safe.
absl::StatusOr<absl::string_view> ParseCheckpointEnvelope(absl::string_view file_bytes,
                                                          absl::string_view name);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_CHECKPOINT_ENVELOPE_H_
