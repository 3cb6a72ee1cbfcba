// ModelExport: a trained generator (in memory or a checkpoint file) as the bytes of one export
// format (ONNX or a PyTorch state dict).
#ifndef GANTRY_WORKERS_EXPORT_MODEL_EXPORT_H_
#define GANTRY_WORKERS_EXPORT_MODEL_EXPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "workers/gan/generator.h"
#include "workers/gan/model_config.h"

namespace gantry::exporter {

enum class ExportFormat { kOnnx, kPytorch };

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

}  // namespace gantry::exporter

#endif  // GANTRY_WORKERS_EXPORT_MODEL_EXPORT_H_
