// TorchScriptExport: a model's generator as a TorchScript module (torch::jit::load in C++,
// torch.jit.load in Python), compiled here from generated TorchScript source, with the input and
// output conventions of an export profile (jobspec/export_profile.h).
#ifndef GANTRY_WORKERS_EXPORT_TORCHSCRIPT_EXPORT_H_
#define GANTRY_WORKERS_EXPORT_TORCHSCRIPT_EXPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/catalog.pb.h"
#include "workers/export/generator_description.h"

namespace gantry::exporter {

// The TorchScript source of the module ExportTorchScript compiles: `generate(latent, energy[,
// theta])` (standard normal latent [N, noise_dim], GeV, rad -> shower [N, x, y, z] GeV, the same
// function as the ONNX graph, with each upsampling stage as gantry's polyphase conv) and the
// profile's `forward`:
//   gantry: forward(latent [N, L], energy [N, 1] GeV[, theta [N, 1] rad]) -> [N, x, y, z] GeV;
//   par04:  forward(input [N, L + 4]) with input = [latent, E / 1,024,000 MeV, theta / (pi/2),
//           two geometry slots (ignored)] -> [N, x * y * z], each cell as a fraction of the
//           primary's energy, z fastest (the theta slot is ignored by fixed-angle models);
//   ddml:   forward(latent [N, L, 1, 1, 1] or [N, L] uniform in [-1, 1], energy [N, 1, 1, 1, 1]
//           or [N, 1] GeV) -> [N, z, x, y] MeV (the latent mapped by sqrt(2) erfinv).
// Each forward asserts its input shapes (a consumer's mismatch is an error naming the shape
// wanted, not a silently wrong shower). Weights are module buffers named after the LibTorch
// parameters with '.' as '_' (and stageI_polyphase_weight/_bias for the folded convs).
// INVALID_ARGUMENT for an unknown profile; FAILED_PRECONDITION for a variable-angle model in the
// ddml profile.
absl::StatusOr<std::string> TorchScriptSource(const GeneratorDescription& description,
                                              gantry::v1::ExportProfile profile);

// The serialized module (torch::jit::Module::save) of TorchScriptSource with the description's
// tensors; its "gantry_description" attribute holds DescriptionJson, "gantry_profile" the profile
// name. TorchScriptSource's errors; INTERNAL when LibTorch cannot compile or save it. Pure
// function; thread-safe.
absl::StatusOr<std::string> ExportTorchScript(const GeneratorDescription& description,
                                              gantry::v1::ExportProfile profile);

}  // namespace gantry::exporter

#endif  // GANTRY_WORKERS_EXPORT_TORCHSCRIPT_EXPORT_H_
