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
  const int64_t l = d.noise_dim;
  switch (jobspec::EffectiveProfile(profile)) {
    case v1::EXPORT_PROFILE_PAR04:
      out->inputs.push_back(
          {kPackedInput,
           {-1, l + jobspec::kPar04ConditionSlots},
           absl::StrCat("[latent (", l, ", standard normal), E / ", jobspec::kPar04MaxEnergyMev,
                        " MeV, theta / (pi/2)", c.variable_angle() ? "" : " (ignored: fixed angle)",
                        ", 2 geometry slots (ignored)]")});
      out->outputs.push_back({kShowerOutput,
                              {-1, c.grid[0] * c.grid[1] * c.grid[2]},
                              "cell energies as fractions of the primary's energy, [N, x * y * z], "
                              "z fastest, then y, then x"});
      break;
    case v1::EXPORT_PROFILE_DDML:
      out->inputs.push_back({kLatentInput,
                             {-1, l, 1, 1, 1},
                             "latent noise, uniform in [-1, 1] (mapped to N(0, 1) inside)"});
      out->inputs.push_back({kEnergyInput, {-1, 1, 1, 1, 1}, "primary energy in GeV"});
      out->outputs.push_back({kShowerOutput,
                              {-1, c.grid[2], c.grid[0], c.grid[1]},
                              "cell energies in MeV, [N, z, x, y]: y fastest, then x, then the "
                              "layer z"});
      break;
    default:
      out->inputs.push_back({kLatentInput, {-1, l}, "latent noise, standard normal"});
      out->inputs.push_back({kEnergyInput, {-1, 1}, "primary energy in GeV"});
      if (c.variable_angle()) {
        out->inputs.push_back(
            {kThetaInput, {-1, 1}, "incidence angle theta in radians (pi/2: perpendicular)"});
      }
      out->outputs.push_back({kShowerOutput,
                              {-1, c.grid[0], c.grid[1], c.grid[2]},
                              "cell energies in GeV, [N, x, y, z], z is depth"});
  }
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
