// libFuzzer target: dataset references of a JobSpec ("ds-<id>", "toymc:<key=value,...>",
// "file:///path.h5") as the server checks them (server ValidateDatasetRef) and the toy Monte Carlo
// spec parser under it (showers ParseToyMcSpec). The first input byte picks the model preset.
// Checks that a toy MC spec the server accepts has a canonical form (the workers' cache key) that
// parses and validates again and is stable: Format(Parse(Format(c))) == Format(c).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "server/requests/field_checks.h"
#include "showers/toy_mc.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr const char* kPresets[] = {"3dgan-25", "3dgan-51", "tiny"};
  const char* preset = kPresets[data[0] % 3];
  const absl::string_view ref(reinterpret_cast<const char*>(data) + 1, size - 1);

  absl::StatusOr<gantry::server::DatasetRefKind> kind =
      gantry::server::ValidateDatasetRef(ref, preset, "spec.dataset");
  if (!kind.ok()) {
    FUZZ_CHECK(kind.status().code() == absl::StatusCode::kInvalidArgument,
               "a bad reference is INVALID_ARGUMENT");
    FUZZ_CHECK(absl::StrContains(kind.status().message(), "spec.dataset"),
               "the error names the field");
  }

  absl::StatusOr<gantry::showers::ToyMcConfig> config =
      gantry::showers::ParseToyMcSpec(std::string_view(ref.data(), ref.size()));
  if (!config.ok() || !gantry::showers::ValidateToyMcConfig(*config).ok()) return 0;
  const std::string canonical = gantry::showers::FormatToyMcSpec(*config);
  absl::StatusOr<gantry::showers::ToyMcConfig> again = gantry::showers::ParseToyMcSpec(canonical);
  FUZZ_CHECK(again.ok(), "the canonical spec must parse");
  FUZZ_CHECK(gantry::showers::ValidateToyMcConfig(*again).ok(), "the canonical spec must validate");
  FUZZ_CHECK(gantry::showers::FormatToyMcSpec(*again) == canonical, "the canonical spec is stable");
  return 0;
}
