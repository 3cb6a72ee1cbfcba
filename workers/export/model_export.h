// ModelExport: a trained generator (in memory or a checkpoint file) as the bytes of one export
// format (ONNX, a PyTorch state dict or a TorchScript module) in one export profile (whose input
// and output conventions: gantry's, Par04's or DDML's; jobspec/export_profile.h).
#ifndef GANTRY_WORKERS_EXPORT_MODEL_EXPORT_H_
#define GANTRY_WORKERS_EXPORT_MODEL_EXPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gantry/v1/catalog.pb.h"
#include "jobspec/model_config.h"
#include "workers/gan/generator.h"

namespace gantry::exporter {

enum class ExportFormat { kOnnx, kPytorch, kTorchScript };

// One input or output of an exported generator (the ONNX graph's inputs and output, the TorchScript
// module's or the PyTorch rebuild's forward arguments and result, in that order).
struct ExportedTensor {
  std::string name;  // kLatentInput, kEnergyInput, kThetaInput, kPackedInput, kShowerOutput
  std::vector<int64_t> shape;  // -1 = free (the batch dimension N)
  std::string description;
};

// An export: the file's bytes and the interface of the generator in it.
struct ExportedModel {
  std::string bytes;
  std::vector<ExportedTensor> inputs;
  std::vector<ExportedTensor> outputs;
  std::vector<int64_t> grid;    // x, y, z cells of a shower
  bool variable_angle = false;  // the generator is conditioned on the angle
};

// "onnx", "pytorch" or "torchscript"; INVALID_ARGUMENT naming them otherwise.
absl::StatusOr<ExportFormat> ParseExportFormat(absl::string_view name);

// The proto's name of `format` (EXPORT_FORMAT_ONNX, ...), and back (INVALID_ARGUMENT for
// UNSPECIFIED and unknown values).
gantry::v1::ExportFormat ToProto(ExportFormat format);
absl::StatusOr<ExportFormat> FromProto(gantry::v1::ExportFormat format);

// The export of `generator` (built from `config`): ExportOnnx, ExportPytorch or ExportTorchScript
// of DescribeGenerator in `profile`. INVALID_ARGUMENT when the profile is not written in the
// format, FAILED_PRECONDITION when it cannot represent the model (jobspec/export_profile.h).
// Reads the generator only; not while it trains.
absl::StatusOr<ExportedModel> ExportGenerator(
    const gan::ModelConfig& config, gan::GeneratorImpl& generator, ExportFormat format,
    gantry::v1::ExportProfile profile = gantry::v1::EXPORT_PROFILE_GANTRY);

// Reads a checkpoint (generator only) and exports it. Errors of ReadCheckpoint, then of
// ExportGenerator.
absl::StatusOr<ExportedModel> ExportCheckpoint(
    const std::string& checkpoint_path, ExportFormat format,
    gantry::v1::ExportProfile profile = gantry::v1::EXPORT_PROFILE_GANTRY);

}  // namespace gantry::exporter

#endif  // GANTRY_WORKERS_EXPORT_MODEL_EXPORT_H_
