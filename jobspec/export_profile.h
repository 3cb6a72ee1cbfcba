// Export profiles: whose input and output conventions an exported generator follows (gantry's own,
// Geant4's Par04 example, Key4hep DDML's regular-grid GAN model), the formats each is written in,
// the models each can represent, and the configuration lines a consumer loads the file with.
// Torch-free: the server refuses at request time what the worker would refuse, the CLI prints the
// snippets, the worker writes the graphs (workers/export) with these constants.
#ifndef GANTRY_JOBSPEC_EXPORT_PROFILE_H_
#define GANTRY_JOBSPEC_EXPORT_PROFILE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gantry/v1/catalog.pb.h"

namespace gantry::jobspec {

// Par04 (Par04InferenceSetup) packs [latent, E / fMaxEnergy, theta / fMaxAngle, two geometry
// one-hot slots] with these constants and multiplies each output cell by the primary's energy in
// MeV.
inline constexpr double kPar04MaxEnergyMev = 1024000.0;
inline constexpr double kPar04MaxAngleRad = 1.5707963267948966;  // 90 degrees
inline constexpr int kPar04ConditionSlots = 4;

// DDML's RegularGridGANModel draws the latent uniform in [-1, 1]; the file maps it to the standard
// normal gantry trained with, sqrt(2) erfinv(u), after clamping u to +-kDdmlLatentClamp (the
// largest float below 1, so the ends map to about +-5.4 instead of infinity).
inline constexpr double kDdmlLatentClamp = 0.99999994039535522;
inline constexpr double kMevPerGev = 1000.0;

// "gantry", "par04", "ddml"; INVALID_ARGUMENT naming the three otherwise.
absl::StatusOr<gantry::v1::ExportProfile> ParseExportProfile(absl::string_view name);
// The name ParseExportProfile reads; UNSPECIFIED is "gantry".
std::string ExportProfileName(gantry::v1::ExportProfile profile);
// "onnx", "pytorch", "torchscript"; "unspecified" for anything else.
std::string ExportFormatName(gantry::v1::ExportFormat format);
// UNSPECIFIED -> GANTRY; the others unchanged.
gantry::v1::ExportProfile EffectiveProfile(gantry::v1::ExportProfile profile);

// OK when `profile` is written in `format` (gantry: every format; par04: ONNX, TorchScript; ddml:
// TorchScript); INVALID_ARGUMENT naming the formats that are, otherwise (and for an unknown
// profile).
absl::Status CheckProfileFormat(gantry::v1::ExportProfile profile, gantry::v1::ExportFormat format);

// OK when `profile` can represent a model with (variable_angle) or without an angle input;
// FAILED_PRECONDITION naming the profiles that can, otherwise (ddml has no angle input).
absl::Status CheckProfileFitsModel(gantry::v1::ExportProfile profile, bool variable_angle);

// The tensor names of an exported file (docs/API.md "Model export").
inline constexpr char kLatentInput[] = "latent";
inline constexpr char kEnergyInput[] = "energy";
inline constexpr char kThetaInput[] = "theta";
inline constexpr char kShowerOutput[] = "shower";
inline constexpr char kPackedInput[] = "input";  // par04: latent and conditions packed

// The inputs and outputs (name, shape with -1 for the batch, float32, what a consumer puts in
// or reads out) of a generator with cells `grid` (x, y, z), a latent of `latent` values and an
// angle input or not, exported in `profile`: the one description the model card, the export's
// metadata and the ONNX graph's value infos share.
struct ProfileInterface {
  std::vector<gantry::v1::ExportTensor> inputs;
  std::vector<gantry::v1::ExportTensor> outputs;
};
ProfileInterface InterfaceOf(gantry::v1::ExportProfile profile, const std::array<int64_t, 3>& grid,
                             int64_t latent, bool variable_angle);

// The tensor of `tensors` named `name`; null when there is none.
const gantry::v1::ExportTensor* FindExportTensor(
    const google::protobuf::RepeatedPtrField<gantry::v1::ExportTensor>& tensors,
    const std::string& name);

// The width of the latent noise a consumer fills for the export `exported` describes: the
// `latent` input's second dimension, or for par04 the packed `input`'s less its condition slots;
// 0 when the inputs do not have the profile's shape.
int64_t ExportLatentWidth(const gantry::v1::ExportMetadata& exported);

// What a consumer puts in its configuration to load the exported file `file_name` described by
// `exported` (its profile, format, interface and SHA-256): Geant4 macro commands for par04,
// DD4hep/ddsim Python steering lines for ddml, C++ for gantry. Lines end in '\n'; comments name
// the model, the checksum and what the consumer must still adapt.
std::string ConsumerSnippet(const gantry::v1::ExportMetadata& exported,
                            const std::string& file_name);

}  // namespace gantry::jobspec

#endif  // GANTRY_JOBSPEC_EXPORT_PROFILE_H_
