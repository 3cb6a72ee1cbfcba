// libFuzzer target: workers/gan ParseModelConfig (the "key=value" model config stored inside every
// checkpoint, so read from files a worker downloads). Checks that a config that parses and
// validates serialises to a stable text: Serialize(Parse(Serialize(c))) == Serialize(c).
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tests/fuzz/fuzz_check.h"
#include "jobspec/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<gantry::gan::ModelConfig> config = gantry::gan::ParseModelConfig(text);
  if (!config.ok()) {
    FUZZ_CHECK(!config.status().message().empty(), "an error must say what is wrong");
    return 0;
  }
  if (!gantry::gan::ValidateModelConfig(*config).ok()) return 0;
  const std::string once = gantry::gan::SerializeModelConfig(*config);
  absl::StatusOr<gantry::gan::ModelConfig> again = gantry::gan::ParseModelConfig(once);
  FUZZ_CHECK(again.ok(), "a serialised valid config must parse");
  FUZZ_CHECK(gantry::gan::ValidateModelConfig(*again).ok(), "a re-parsed config must validate");
  FUZZ_CHECK(gantry::gan::SerializeModelConfig(*again) == once, "serialisation must be stable");
  return 0;
}
