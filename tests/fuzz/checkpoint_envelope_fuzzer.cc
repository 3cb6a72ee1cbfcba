// libFuzzer target: the checkpoint file header (workers/gan ParseCheckpointEnvelope, the torch-free
// part of ReadCheckpoint). A payload it accepts must lie inside the input, have the size the
// header states and the SHA-256 it names.
#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/sha256.h"
#include "tests/fuzz/fuzz_check.h"
#include "workers/gan/checkpoint_envelope.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view file(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<absl::string_view> payload =
      gantry::gan::ParseCheckpointEnvelope(file, "fuzz.ckpt");
  if (!payload.ok()) {
    FUZZ_CHECK(!payload.status().message().empty(), "an error must say what is wrong");
    return 0;
  }
  FUZZ_CHECK(payload->data() >= file.data() &&
                 payload->data() + payload->size() == file.data() + file.size(),
             "the payload is the tail of the file");
  FUZZ_CHECK(file.find(gantry::Sha256Hex(*payload)) != absl::string_view::npos,
             "the header names the payload's sha256");
  return 0;
}
