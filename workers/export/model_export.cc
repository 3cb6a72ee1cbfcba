#include "workers/export/model_export.h"

#include <c10/core/InferenceMode.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "jobspec/export_profile.h"
#include "workers/export/generator_description.h"
#include "workers/export/onnx_export.h"
#include "workers/export/pytorch_export.h"
#include "workers/export/torchscript_export.h"
#include "workers/gan/checkpoint.h"

namespace gantry::exporter {
namespace {

namespace v1 = ::gantry::v1;

// The inputs and outputs of the file ExportGenerator writes for `d` in `profile`.
void DescribeInterface(const GeneratorDescription& d, v1::ExportProfile profile,
                       ExportedModel* out) {
  const gan::ModelConfig& c = d.config;
  const jobspec::ProfileInterface interface =
      jobspec::InterfaceOf(profile, c.grid, d.noise_dim, c.variable_angle());
  auto copy = [](const std::vector<v1::ExportTensor>& from, std::vector<ExportedTensor>* to) {
    for (const v1::ExportTensor& t : from) {
      to->push_back({t.name(), {t.shape().begin(), t.shape().end()}, t.description()});
    }
  };
  copy(interface.inputs, &out->inputs);
  copy(interface.outputs, &out->outputs);
  out->grid = {c.grid[0], c.grid[1], c.grid[2]};
  out->variable_angle = c.variable_angle();
}

}  // namespace

absl::StatusOr<ExportFormat> ParseExportFormat(absl::string_view name) {
  if (name == "onnx") return ExportFormat::kOnnx;
  if (name == "pytorch") return ExportFormat::kPytorch;
  if (name == "torchscript") return ExportFormat::kTorchScript;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown export format \"", name, "\"; use onnx, pytorch or torchscript"));
}

v1::ExportFormat ToProto(ExportFormat format) {
  switch (format) {
    case ExportFormat::kOnnx:
      return v1::EXPORT_FORMAT_ONNX;
    case ExportFormat::kPytorch:
      return v1::EXPORT_FORMAT_PYTORCH;
    case ExportFormat::kTorchScript:
      return v1::EXPORT_FORMAT_TORCHSCRIPT;
  }
  return v1::EXPORT_FORMAT_UNSPECIFIED;
}

absl::StatusOr<ExportFormat> FromProto(v1::ExportFormat format) {
  for (ExportFormat f : {ExportFormat::kOnnx, ExportFormat::kPytorch, ExportFormat::kTorchScript}) {
    if (ToProto(f) == format) return f;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "format: ", static_cast<int>(format), " is not an export format; use onnx, pytorch or "
      "torchscript"));
}

absl::StatusOr<ExportedModel> ExportGenerator(const gan::ModelConfig& config,
                                              gan::GeneratorImpl& generator, ExportFormat format,
                                              v1::ExportProfile profile) {
  if (config.generator_spots) {
    return absl::FailedPreconditionError(
        "a generator with spot sampling (generator_spots) cannot be exported yet: the exported "
        "graph would give the expected showers without their spots");
  }
  if (config.template_relative_residual) {
    return absl::FailedPreconditionError(
        "a generator with a relative residual (template_relative_residual) cannot be exported "
        "yet: the exported graph adds the residual as it is");
  }
  if (!config.template_residual_noise) {
    return absl::FailedPreconditionError(
        "a generator whose network sees only the energy (template_residual_noise=0) cannot be "
        "exported yet: the exported graph feeds the noise to the network");
  }
  if (absl::Status s = jobspec::CheckProfileFormat(profile, ToProto(format)); !s.ok()) return s;
  if (absl::Status s = jobspec::CheckProfileFitsModel(profile, config.variable_angle()); !s.ok()) {
    return s;
  }
  absl::StatusOr<GeneratorDescription> d = [&] {
    c10::InferenceMode guard;
    return DescribeGenerator(config, generator);
  }();
  if (!d.ok()) return d.status();
  absl::StatusOr<std::string> bytes = format == ExportFormat::kOnnx ? ExportOnnx(*d, profile)
                                      : format == ExportFormat::kPytorch
                                          ? ExportPytorch(*d)
                                          : ExportTorchScript(*d, profile);
  if (!bytes.ok()) return bytes.status();
  ExportedModel out;
  DescribeInterface(*d, profile, &out);
  out.bytes = *std::move(bytes);
  return out;
}

absl::StatusOr<ExportedModel> ExportCheckpoint(const std::string& checkpoint_path,
                                               ExportFormat format, v1::ExportProfile profile) {
  absl::StatusOr<gan::TrainingState> state =
      gan::ReadCheckpoint(checkpoint_path, /*load_optimizers=*/false);
  if (!state.ok()) return state.status();
  return ExportGenerator(state->config, *state->generator, format, profile);
}

}  // namespace gantry::exporter
