#include "jobspec/export_profile.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gantry::jobspec {
namespace {

namespace v1 = ::gantry::v1;

int64_t Grid(const v1::ExportMetadata& exported, int axis) {
  return exported.grid_size() == 3 ? exported.grid(axis) : 0;
}

}  // namespace

ProfileInterface InterfaceOf(v1::ExportProfile profile, const std::array<int64_t, 3>& grid,
                             int64_t latent, bool variable_angle) {
  auto tensor = [](const char* name, std::vector<int64_t> shape, std::string description) {
    v1::ExportTensor t;
    t.set_name(name);
    for (int64_t d : shape) t.add_shape(d);
    t.set_element_type("float32");
    t.set_description(std::move(description));
    return t;
  };
  const auto [x, y, z] = grid;
  ProfileInterface out;
  switch (EffectiveProfile(profile)) {
    case v1::EXPORT_PROFILE_PAR04:
      out.inputs.push_back(tensor(
          kPackedInput, {-1, latent + kPar04ConditionSlots},
          absl::StrCat("[latent (", latent, ", standard normal), E / ", kPar04MaxEnergyMev,
                       " MeV, theta / (pi/2)", variable_angle ? "" : " (ignored: fixed angle)",
                       ", 2 geometry slots (ignored)]")));
      out.outputs.push_back(tensor(kShowerOutput, {-1, x * y * z},
                                   "cell energies as fractions of the primary's energy, "
                                   "[N, x * y * z], z fastest, then y, then x"));
      break;
    case v1::EXPORT_PROFILE_DDML:
      out.inputs.push_back(tensor(kLatentInput, {-1, latent, 1, 1, 1},
                                  "latent noise, uniform in [-1, 1] (mapped to N(0, 1) inside)"));
      out.inputs.push_back(tensor(kEnergyInput, {-1, 1, 1, 1, 1}, "primary energy in GeV"));
      out.outputs.push_back(tensor(kShowerOutput, {-1, z, x, y},
                                   "cell energies in MeV, [N, z, x, y]: y fastest, then x, then "
                                   "the layer z"));
      break;
    default:
      out.inputs.push_back(tensor(kLatentInput, {-1, latent}, "latent noise, standard normal"));
      out.inputs.push_back(tensor(kEnergyInput, {-1, 1}, "primary energy in GeV"));
      if (variable_angle) {
        out.inputs.push_back(tensor(kThetaInput, {-1, 1},
                                    "incidence angle theta in radians (pi/2: perpendicular)"));
      }
      out.outputs.push_back(
          tensor(kShowerOutput, {-1, x, y, z}, "cell energies in GeV, [N, x, y, z], z is depth"));
  }
  return out;
}

const v1::ExportTensor* FindExportTensor(
    const google::protobuf::RepeatedPtrField<v1::ExportTensor>& tensors, const std::string& name) {
  for (const v1::ExportTensor& t : tensors) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

int64_t ExportLatentWidth(const v1::ExportMetadata& exported) {
  if (EffectiveProfile(exported.profile()) == v1::EXPORT_PROFILE_PAR04) {
    const v1::ExportTensor* packed = FindExportTensor(exported.inputs(), "input");
    return packed != nullptr && packed->shape_size() == 2
               ? std::max<int64_t>(0, packed->shape(1) - kPar04ConditionSlots)
               : 0;
  }
  const v1::ExportTensor* latent = FindExportTensor(exported.inputs(), "latent");
  return latent != nullptr && latent->shape_size() >= 2 ? latent->shape(1) : 0;
}

absl::StatusOr<v1::ExportProfile> ParseExportProfile(absl::string_view name) {
  if (name == "gantry") return v1::EXPORT_PROFILE_GANTRY;
  if (name == "par04") return v1::EXPORT_PROFILE_PAR04;
  if (name == "ddml") return v1::EXPORT_PROFILE_DDML;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown export profile \"", name, "\"; use gantry, par04 or ddml"));
}

v1::ExportProfile EffectiveProfile(v1::ExportProfile profile) {
  return profile == v1::EXPORT_PROFILE_UNSPECIFIED ? v1::EXPORT_PROFILE_GANTRY : profile;
}

std::string ExportProfileName(v1::ExportProfile profile) {
  switch (EffectiveProfile(profile)) {
    case v1::EXPORT_PROFILE_PAR04:
      return "par04";
    case v1::EXPORT_PROFILE_DDML:
      return "ddml";
    default:
      return "gantry";
  }
}

std::string ExportFormatName(v1::ExportFormat format) {
  switch (format) {
    case v1::EXPORT_FORMAT_ONNX:
      return "onnx";
    case v1::EXPORT_FORMAT_PYTORCH:
      return "pytorch";
    case v1::EXPORT_FORMAT_TORCHSCRIPT:
      return "torchscript";
    default:
      return "unspecified";
  }
}

absl::Status CheckProfileFormat(v1::ExportProfile profile, v1::ExportFormat format) {
  const bool known_format = format == v1::EXPORT_FORMAT_ONNX ||
                            format == v1::EXPORT_FORMAT_PYTORCH ||
                            format == v1::EXPORT_FORMAT_TORCHSCRIPT;
  if (!known_format) {
    return absl::InvalidArgumentError(
        absl::StrCat("format: ", static_cast<int>(format),
                     " is not an export format; use onnx, pytorch or torchscript"));
  }
  switch (EffectiveProfile(profile)) {
    case v1::EXPORT_PROFILE_GANTRY:
      return absl::OkStatus();
    case v1::EXPORT_PROFILE_PAR04:
      if (format != v1::EXPORT_FORMAT_PYTORCH) return absl::OkStatus();
      return absl::InvalidArgumentError(
          "profile par04 is written as onnx (Par04's ONNX Runtime inference) or torchscript, not "
          "as a pytorch state dict; give format onnx or torchscript");
    case v1::EXPORT_PROFILE_DDML:
      if (format == v1::EXPORT_FORMAT_TORCHSCRIPT) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(
          "profile ddml is written only as torchscript (DDML's TorchInference; its uniform latent "
          "is mapped through erfinv, which ONNX opset 13 lacks), not as ",
          ExportFormatName(format), "; give format torchscript"));
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("profile: ", static_cast<int>(profile),
                       " is not an export profile; use gantry, par04 or ddml"));
  }
}

absl::Status CheckProfileFitsModel(v1::ExportProfile profile, bool variable_angle) {
  if (EffectiveProfile(profile) == v1::EXPORT_PROFILE_DDML && variable_angle) {
    return absl::FailedPreconditionError(
        "profile ddml has no angle input (DDML's regular-grid GAN model feeds latent and energy "
        "only), and this model is conditioned on the angle; export it with profile par04 or "
        "gantry");
  }
  return absl::OkStatus();
}

std::string ConsumerSnippet(const v1::ExportMetadata& exported, const std::string& file_name) {
  const int64_t latent = ExportLatentWidth(exported);
  const std::string header = absl::StrCat(
      " ", exported.model_ref(), " as ", ExportFormatName(exported.format()), " (",
      ExportProfileName(exported.profile()), " profile); check the file first: ", "sha256sum ",
      file_name, " must print ", exported.sha256(), "\n");
  switch (EffectiveProfile(exported.profile())) {
    case v1::EXPORT_PROFILE_PAR04:
      return absl::StrCat(
          "# Geant4 Par04 macro lines for", header,
          "# The hook places output cells on its cylindrical (rho, phi, z) mesh; this model's grid "
          "is\n# Cartesian (x, y, z), so replace its cell positions (see the model card, "
          "\"profile\").\n",
          "/Par04/inference/setInferenceLibrary ",
          exported.format() == v1::EXPORT_FORMAT_ONNX ? "ONNX" : "Torch", "\n",
          "/Par04/inference/setModelPathName ./", file_name, "\n",
          "/Par04/inference/setSizeLatentVector ", latent, "\n",
          "/Par04/inference/setSizeConditionVector ", kPar04ConditionSlots, "\n",
          "/Par04/inference/setNbOfRhoCells ", Grid(exported, 0), "\n",
          "/Par04/inference/setNbOfPhiCells ", Grid(exported, 1), "\n",
          "/Par04/inference/setNbOfZCells ", Grid(exported, 2), "\n");
    case v1::EXPORT_PROFILE_DDML:
      return absl::StrCat(
          "# DD4hep/ddsim steering (Python) for DDML's regular-grid GAN model:", header,
          "# (an endcap calorimeter: RegularGridGANEndcapTorchModel instead)\n",
          "model = DDG4.Action(kernel, \"RegularGridGANPolyhedraBarrelTorchModel/GantryModel\")\n",
          "model.ModelPath = \"", file_name, "\"\n", "model.LatentVectorSize = ", latent, "\n",
          "model.NCellsX = ", Grid(exported, 0), "\n", "model.NCellsY = ", Grid(exported, 1), "\n",
          "model.NCellsZ = ", Grid(exported, 2), "\n", "model.CellSizeX = 5.1  # mm\n",
          "model.CellSizeY = 5.1  # mm\n");
    default:
      break;
  }
  std::string inputs;
  for (const v1::ExportTensor& t : exported.inputs()) {
    absl::StrAppend(&inputs, inputs.empty() ? "" : ", ", t.name());
  }
  const std::string contract = absl::StrCat(
      "// forward(", inputs, "): latent [N, ", latent,
      "] ~ N(0, 1), energy [N, 1] GeV, theta [N, 1] rad where present -> shower [N, x, y, z] "
      "GeV\n");
  switch (exported.format()) {
    case v1::EXPORT_FORMAT_TORCHSCRIPT:
      return absl::StrCat("// C++ (LibTorch) for", header, contract,
                          "torch::jit::Module generator = torch::jit::load(\"", file_name, "\");\n",
                          "generator.eval();\n", "at::Tensor shower = generator.forward({", inputs,
                          "}).toTensor();\n");
    case v1::EXPORT_FORMAT_ONNX:
      return absl::StrCat("// C++ (ONNX Runtime) for", header, contract,
                          "Ort::Session session(env, \"", file_name,
                          "\", Ort::SessionOptions());\n");
    default:
      return absl::StrCat("# Python (clients/python/gantry_export) for", header,
                          "import gantry_export\n", "generator = gantry_export.load(\"", file_name,
                          "\")  # forward(", inputs, ")\n");
  }
}

}  // namespace gantry::jobspec
