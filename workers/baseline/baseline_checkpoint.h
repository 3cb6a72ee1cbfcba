// BaselineCheckpoint: a fitted baseline (BaselineParameters) as a checkpoint file: the envelope of
// every gantry checkpoint (checkpoint_envelope.h: magic, SHA-256, size) around a payload that opens
// with kBaselinePayloadMagic, a few text lines, then the per-cell values as float32. Read with
// every size bounded before anything is allocated. Torch-free.
#ifndef GANTRY_WORKERS_BASELINE_BASELINE_CHECKPOINT_H_
#define GANTRY_WORKERS_BASELINE_BASELINE_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "workers/baseline/baseline_sampler.h"

namespace gantry::baseline {

// The largest baseline checkpoint file read: kMaxBaselineCells x (2 + kMaxBaselineModes) float32
// values and the text lines.
inline constexpr int64_t kMaxBaselineCheckpointBytes =
    kMaxBaselineCells * (2 + kMaxBaselineModes) * 4 + (int64_t{64} << 10);

// The payload (docs/MODELS.md "Baselines" has the format).
std::string SerializeBaselinePayload(const BaselineParameters& p);
// Parses and checks a payload: INVALID_ARGUMENT for a payload that is not a baseline's; DATA_LOSS
// for a damaged one (a bad line, a count over its bound, too few or too many value bytes, values
// that ValidateBaselineParameters refuses). `name` labels the messages.
absl::StatusOr<BaselineParameters> ParseBaselinePayload(absl::string_view payload,
                                                        absl::string_view name);

// Writes atomically (temp file + rename). INVALID_ARGUMENT for parameters that do not validate.
absl::Status WriteBaselineCheckpoint(const std::string& path, const BaselineParameters& p);
// NOT_FOUND: no file; INVALID_ARGUMENT: over kMaxBaselineCheckpointBytes, not a gantry checkpoint
// or not a baseline; DATA_LOSS: truncated, padded, SHA-256 mismatch or a damaged payload.
absl::StatusOr<BaselineParameters> ReadBaselineCheckpoint(const std::string& path);

}  // namespace gantry::baseline

#endif  // GANTRY_WORKERS_BASELINE_BASELINE_CHECKPOINT_H_
