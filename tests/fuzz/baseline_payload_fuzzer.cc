// libFuzzer target: a baseline checkpoint's payload (workers/baseline ParseBaselinePayload, what
// ReadBaselineCheckpoint parses after the envelope). Whatever the bytes, it allocates at most what
// the payload's size allows, and what it accepts validates and survives a round trip.
#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tests/fuzz/fuzz_check.h"
#include "workers/baseline/baseline_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view payload(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<gantry::baseline::BaselineParameters> parsed =
      gantry::baseline::ParseBaselinePayload(payload, "fuzz");
  if (!parsed.ok()) {
    FUZZ_CHECK(!parsed.status().message().empty(), "an error must say what is wrong");
    return 0;
  }
  FUZZ_CHECK(gantry::baseline::ValidateBaselineParameters(*parsed).ok(),
             "an accepted payload validates");
  FUZZ_CHECK(static_cast<size_t>((2 + parsed->modes.size()) * parsed->cells() * 4) <= size,
             "the values come from the payload's own bytes");
  const std::string again = gantry::baseline::SerializeBaselinePayload(*parsed);
  FUZZ_CHECK(gantry::baseline::ParseBaselinePayload(again, "again").ok(),
             "an accepted payload survives a round trip");
  return 0;
}
