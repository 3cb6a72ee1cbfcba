#include "workers/export/model_export.h"

#include <c10/core/InferenceMode.h>

#include "absl/strings/str_cat.h"
#include "workers/export/generator_description.h"
#include "workers/export/onnx_export.h"
#include "workers/export/pytorch_export.h"
#include "workers/gan/checkpoint.h"

namespace gantry::exporter {

absl::StatusOr<ExportFormat> ParseExportFormat(absl::string_view name) {
  if (name == "onnx") return ExportFormat::kOnnx;
  if (name == "pytorch") return ExportFormat::kPytorch;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown export format \"", name, "\"; use onnx or pytorch"));
}

absl::StatusOr<std::string> ExportGenerator(const gan::ModelConfig& config,
                                            gan::GeneratorImpl& generator, ExportFormat format) {
  absl::StatusOr<GeneratorDescription> d = [&] {
    c10::InferenceMode guard;
    return DescribeGenerator(config, generator);
  }();
  if (!d.ok()) return d.status();
  return format == ExportFormat::kOnnx ? ExportOnnx(*d) : ExportPytorch(*d);
}

absl::StatusOr<std::string> ExportCheckpoint(const std::string& checkpoint_path,
                                             ExportFormat format) {
  absl::StatusOr<gan::TrainingState> state =
      gan::ReadCheckpoint(checkpoint_path, /*load_optimizers=*/false);
  if (!state.ok()) return state.status();
  return ExportGenerator(state->config, *state->generator, format);
}

}  // namespace gantry::exporter
