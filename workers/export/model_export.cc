#include "workers/export/model_export.h"

#include <c10/core/InferenceMode.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "workers/export/generator_description.h"
#include "workers/export/onnx_export.h"
#include "workers/export/pytorch_export.h"
#include "workers/gan/checkpoint.h"

namespace gantry::exporter {
namespace {

// The inputs and outputs of the graph ExportOnnx writes for `d` (and of the PyTorch rebuild).
void DescribeInterface(const GeneratorDescription& d, ExportedModel* out) {
  const gan::ModelConfig& c = d.config;
  out->inputs.push_back({kLatentInput, {-1, d.noise_dim}, "latent noise, standard normal"});
  out->inputs.push_back({kEnergyInput, {-1, 1}, "primary energy in GeV"});
  if (c.variable_angle()) {
    out->inputs.push_back(
        {kThetaInput, {-1, 1}, "incidence angle theta in radians (pi/2: perpendicular)"});
  }
  out->outputs.push_back({kShowerOutput,
                          {-1, c.grid[0], c.grid[1], c.grid[2]},
                          "cell energies in GeV, [N, x, y, z], z is depth"});
}

}  // namespace

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

namespace gantry::exporter {

absl::StatusOr<ExportedModel> ExportCheckpointWithInterface(const std::string& checkpoint_path,
                                                            ExportFormat format) {
  absl::StatusOr<gan::TrainingState> state =
      gan::ReadCheckpoint(checkpoint_path, /*load_optimizers=*/false);
  if (!state.ok()) return state.status();
  absl::StatusOr<GeneratorDescription> d = [&] {
    c10::InferenceMode guard;
    return DescribeGenerator(state->config, *state->generator);
  }();
  if (!d.ok()) return d.status();
  ExportedModel out;
  DescribeInterface(*d, &out);
  absl::StatusOr<std::string> bytes =
      format == ExportFormat::kOnnx ? ExportOnnx(*d) : ExportPytorch(*d);
  if (!bytes.ok()) return bytes.status();
  out.bytes = *std::move(bytes);
  return out;
}

}  // namespace gantry::exporter
