// ModelExport: a trained generator (in memory or a checkpoint file) as the bytes of one export
// format (ONNX or a PyTorch state dict).
#ifndef GANTRY_WORKERS_EXPORT_MODEL_EXPORT_H_
#define GANTRY_WORKERS_EXPORT_MODEL_EXPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "workers/gan/generator.h"
#include "jobspec/model_config.h"

namespace gantry::exporter {

enum class ExportFormat { kOnnx, kPytorch };

// One input or output of an exported generator (the same in both formats: the ONNX graph's
// inputs and output, the PyTorch rebuild's forward(latent, energy[, theta]) and its result).
struct ExportedTensor {
  std::string name;            // kLatentInput, kEnergyInput, kThetaInput or kShowerOutput
  std::vector<int64_t> shape;  // -1 = free (the batch dimension N)
  std::string description;
};

// An export: the file's bytes and the interface of the generator in it.
struct ExportedModel {
  std::string bytes;
  std::vector<ExportedTensor> inputs;
  std::vector<ExportedTensor> outputs;
};

// "onnx" or "pytorch"; INVALID_ARGUMENT naming both otherwise.
absl::StatusOr<ExportFormat> ParseExportFormat(absl::string_view name);

// The export of `generator` (built from `config`): ExportOnnx or ExportPytorch of
// DescribeGenerator. Reads the generator only; not while it trains.
absl::StatusOr<std::string> ExportGenerator(const gan::ModelConfig& config,
                                            gan::GeneratorImpl& generator, ExportFormat format);

// Reads a checkpoint (generator only) and exports it. Errors of ReadCheckpoint, then of
// ExportGenerator.
absl::StatusOr<std::string> ExportCheckpoint(const std::string& checkpoint_path,
                                             ExportFormat format);

// ExportCheckpoint with the generator's inputs and outputs (latent [N, noise_dim], energy [N, 1],
// theta [N, 1] for variable-angle models; shower [N, x, y, z]).
absl::StatusOr<ExportedModel> ExportCheckpointWithInterface(const std::string& checkpoint_path,
                                                            ExportFormat format);

}  // namespace gantry::exporter

#endif  // GANTRY_WORKERS_EXPORT_MODEL_EXPORT_H_
