// PytorchExport: a model's generator as a pickled dictionary that Python's torch.load reads, with
// the layer list the rebuild in clients/python/gantry_export needs.
#ifndef GANTRY_WORKERS_EXPORT_PYTORCH_EXPORT_H_
#define GANTRY_WORKERS_EXPORT_PYTORCH_EXPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "workers/export/generator_description.h"

namespace gantry::exporter {

// The bytes of a torch.save-compatible zip archive (as LibTorch's pickle_save, without type tags)
// holding a dict:
// "format" = "gantry-3dgan-generator", "format_version" = 1, "description" = DescriptionJson (a
// str), "state_dict" = {name: tensor} with every parameter and buffer under its LibTorch name
// ("dense.weight", "stage0.conv.weight", "stage0.bn.running_var", ...). INTERNAL when LibTorch
// fails. Pure function; thread-safe.
absl::StatusOr<std::string> ExportPytorch(const GeneratorDescription& description);

}  // namespace gantry::exporter

#endif  // GANTRY_WORKERS_EXPORT_PYTORCH_EXPORT_H_
