// OnnxExport: a model's generator as an ONNX graph (opset 13, IR 8) that maps the latent noise and
// the primary energy in GeV (and the angle in radians, 3dgan-51) to showers in GeV.
#ifndef GANTRY_WORKERS_EXPORT_ONNX_EXPORT_H_
#define GANTRY_WORKERS_EXPORT_ONNX_EXPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/catalog.pb.h"
#include "workers/export/generator_description.h"

namespace gantry::exporter {

// The ONNX operator set the graph is written for (default domain only).
inline constexpr int64_t kOnnxOpset = 13;

// The serialized onnx.ModelProto of `description`. Inputs: `latent` float32 [N, noise_dim]
// (standard normal noise), `energy` float32 [N, 1] (GeV), and for the variable-angle architecture
// `theta` float32 [N, 1] (radians). Output: `shower` float32 [N, x, y, z] (GeV, z the depth). The
// graph divides the energy by energy_scale, builds the conditioned input as gantry does, runs the
// layer sequence (Gemm, Reshape, then per stage Pad -> Conv -> activation -> BatchNormalization
// with the running statistics; an upsampling stage's nearest upsample, pad and conv as gantry's
// polyphase conv: one Conv on the coarse grid, its phases interleaved by Reshape -> Transpose ->
// Reshape) and undoes the cell scaling (^(1/cell_power), / cell_scale). metadata_props carry the layer list (DescriptionJson) as
// "gantry.description" and the gantry config text as "gantry.config". INTERNAL when protobuf cannot
// serialize the model. Pure function; thread-safe.
// Profile par04 (jobspec/export_profile.h) wraps the same graph: one input `input` float32
// [N, noise_dim + 4] = [latent, E / 1,024,000 MeV, theta / (pi/2), 2 geometry slots (ignored)]
// and the output `shower` [N, x * y * z] as fractions of the primary's energy (z fastest); the
// theta slot is ignored by fixed-angle models. metadata_props also carry "gantry.profile".
// INVALID_ARGUMENT for a profile ONNX does not write (ddml).
absl::StatusOr<std::string> ExportOnnx(const GeneratorDescription& description,
                                       gantry::v1::ExportProfile profile);

}  // namespace gantry::exporter

#endif  // GANTRY_WORKERS_EXPORT_ONNX_EXPORT_H_
