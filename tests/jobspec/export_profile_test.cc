// Export profiles (jobspec/export_profile.h): names, which format writes which profile, which
// model a profile can represent, and the consumer snippets gantry models export prints.
#include "jobspec/export_profile.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

namespace gantry::jobspec {
namespace {

namespace v1 = ::gantry::v1;

TEST(ExportProfileTest, NamesRoundTripAndUnspecifiedIsGantry) {
  for (const char* name : {"gantry", "par04", "ddml"}) {
    absl::StatusOr<v1::ExportProfile> p = ParseExportProfile(name);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(ExportProfileName(*p), name);
  }
  EXPECT_EQ(ExportProfileName(v1::EXPORT_PROFILE_UNSPECIFIED), "gantry");
  EXPECT_EQ(EffectiveProfile(v1::EXPORT_PROFILE_UNSPECIFIED), v1::EXPORT_PROFILE_GANTRY);
  absl::StatusOr<v1::ExportProfile> bad = ParseExportProfile("Par04");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("use gantry, par04 or ddml"), std::string::npos);
}

// Shapes as the text of their dimensions, e.g. "-1,16".
std::string ShapeOf(const v1::ExportTensor& t) {
  std::string out;
  for (int64_t d : t.shape()) out += (out.empty() ? "" : ",") + std::to_string(d);
  return out;
}

TEST(ExportProfileTest, EachProfilesInterfaceHasItsNamesShapesAndUnits) {
  const std::array<int64_t, 3> grid = {25, 24, 23};
  ProfileInterface g = InterfaceOf(v1::EXPORT_PROFILE_UNSPECIFIED, grid, 16, false);
  ASSERT_EQ(g.inputs.size(), 2u);
  EXPECT_EQ(g.inputs[0].name(), "latent");
  EXPECT_EQ(ShapeOf(g.inputs[0]), "-1,16");
  EXPECT_EQ(g.inputs[1].name(), "energy");
  EXPECT_EQ(g.inputs[1].element_type(), "float32");
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(ShapeOf(g.outputs[0]), "-1,25,24,23");
  EXPECT_NE(g.outputs[0].description().find("GeV"), std::string::npos);
  g = InterfaceOf(v1::EXPORT_PROFILE_GANTRY, grid, 16, true);
  ASSERT_EQ(g.inputs.size(), 3u);
  EXPECT_EQ(g.inputs[2].name(), "theta");

  const ProfileInterface par04 = InterfaceOf(v1::EXPORT_PROFILE_PAR04, grid, 16, false);
  ASSERT_EQ(par04.inputs.size(), 1u);
  EXPECT_EQ(par04.inputs[0].name(), "input");
  EXPECT_EQ(ShapeOf(par04.inputs[0]), "-1,20");  // latent + 4 condition slots
  EXPECT_NE(par04.inputs[0].description().find("ignored: fixed angle"), std::string::npos);
  EXPECT_EQ(ShapeOf(par04.outputs[0]), std::string("-1,") + std::to_string(25 * 24 * 23));

  const ProfileInterface ddml = InterfaceOf(v1::EXPORT_PROFILE_DDML, grid, 16, false);
  ASSERT_EQ(ddml.inputs.size(), 2u);
  EXPECT_EQ(ShapeOf(ddml.inputs[0]), "-1,16,1,1,1");
  EXPECT_EQ(ShapeOf(ddml.inputs[1]), "-1,1,1,1,1");
  EXPECT_EQ(ShapeOf(ddml.outputs[0]), "-1,23,25,24");  // [N, z, x, y]
  EXPECT_NE(ddml.outputs[0].description().find("MeV"), std::string::npos);
}

TEST(ExportProfileTest, FormatsOfEachProfile) {
  const v1::ExportFormat all[] = {v1::EXPORT_FORMAT_ONNX, v1::EXPORT_FORMAT_PYTORCH,
                                  v1::EXPORT_FORMAT_TORCHSCRIPT};
  for (v1::ExportFormat f : all) {
    EXPECT_TRUE(CheckProfileFormat(v1::EXPORT_PROFILE_UNSPECIFIED, f).ok());
    EXPECT_TRUE(CheckProfileFormat(v1::EXPORT_PROFILE_GANTRY, f).ok());
  }
  EXPECT_TRUE(CheckProfileFormat(v1::EXPORT_PROFILE_PAR04, v1::EXPORT_FORMAT_ONNX).ok());
  EXPECT_TRUE(CheckProfileFormat(v1::EXPORT_PROFILE_PAR04, v1::EXPORT_FORMAT_TORCHSCRIPT).ok());
  EXPECT_EQ(CheckProfileFormat(v1::EXPORT_PROFILE_PAR04, v1::EXPORT_FORMAT_PYTORCH).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckProfileFormat(v1::EXPORT_PROFILE_DDML, v1::EXPORT_FORMAT_TORCHSCRIPT).ok());
  absl::Status s = CheckProfileFormat(v1::EXPORT_PROFILE_DDML, v1::EXPORT_FORMAT_ONNX);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("give format torchscript"), std::string::npos) << s;
  EXPECT_EQ(CheckProfileFormat(v1::EXPORT_PROFILE_GANTRY, v1::EXPORT_FORMAT_UNSPECIFIED).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckProfileFormat(static_cast<v1::ExportProfile>(7), v1::EXPORT_FORMAT_ONNX).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ExportProfileTest, DdmlRefusesAVariableAngleModelNamingTheProfilesThatFit) {
  absl::Status s = CheckProfileFitsModel(v1::EXPORT_PROFILE_DDML, /*variable_angle=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("export it with profile par04 or gantry"), std::string::npos) << s;
  EXPECT_TRUE(CheckProfileFitsModel(v1::EXPORT_PROFILE_DDML, false).ok());
  EXPECT_TRUE(CheckProfileFitsModel(v1::EXPORT_PROFILE_PAR04, true).ok());
  EXPECT_TRUE(CheckProfileFitsModel(v1::EXPORT_PROFILE_GANTRY, true).ok());
}

v1::ExportMetadata Metadata(v1::ExportProfile profile, v1::ExportFormat format) {
  v1::ExportMetadata m;
  m.set_profile(profile);
  m.set_format(format);
  m.set_model_ref("calo:3");
  m.set_sha256(std::string(64, 'e'));
  for (int64_t n : {25, 24, 23}) m.add_grid(n);
  v1::ExportTensor* t = m.add_inputs();
  if (profile == v1::EXPORT_PROFILE_PAR04) {
    t->set_name("input");
    t->add_shape(-1);
    t->add_shape(16 + kPar04ConditionSlots);
  } else {
    t->set_name("latent");
    t->add_shape(-1);
    t->add_shape(16);
    m.add_inputs()->set_name("energy");
  }
  return m;
}

TEST(ExportProfileTest, SnippetsCarryTheFileChecksumAndTheConsumersSettings) {
  const std::string par04 =
      ConsumerSnippet(Metadata(v1::EXPORT_PROFILE_PAR04, v1::EXPORT_FORMAT_ONNX), "calo.onnx");
  for (const char* line :
       {"/Par04/inference/setInferenceLibrary ONNX\n",
        "/Par04/inference/setModelPathName ./calo.onnx\n",
        "/Par04/inference/setSizeLatentVector 16\n", "/Par04/inference/setSizeConditionVector 4\n",
        "/Par04/inference/setNbOfRhoCells 25\n", "/Par04/inference/setNbOfPhiCells 24\n",
        "/Par04/inference/setNbOfZCells 23\n"}) {
    EXPECT_NE(par04.find(line), std::string::npos) << line << " in\n" << par04;
  }
  EXPECT_NE(par04.find(std::string(64, 'e')), std::string::npos) << par04;
  EXPECT_NE(
      ConsumerSnippet(Metadata(v1::EXPORT_PROFILE_PAR04, v1::EXPORT_FORMAT_TORCHSCRIPT), "calo.pt")
          .find("setInferenceLibrary Torch"),
      std::string::npos);

  const std::string ddml =
      ConsumerSnippet(Metadata(v1::EXPORT_PROFILE_DDML, v1::EXPORT_FORMAT_TORCHSCRIPT), "calo.pt");
  for (const char* line :
       {"RegularGridGANPolyhedraBarrelTorchModel", "model.ModelPath = \"calo.pt\"\n",
        "model.LatentVectorSize = 16\n", "model.NCellsX = 25\n", "model.NCellsY = 24\n",
        "model.NCellsZ = 23\n", "model.CellSizeX = 5.1"}) {
    EXPECT_NE(ddml.find(line), std::string::npos) << line << " in\n" << ddml;
  }

  const std::string gantry = ConsumerSnippet(
      Metadata(v1::EXPORT_PROFILE_GANTRY, v1::EXPORT_FORMAT_TORCHSCRIPT), "calo.pt");
  EXPECT_NE(gantry.find("torch::jit::load(\"calo.pt\")"), std::string::npos) << gantry;
  EXPECT_NE(gantry.find("forward({latent, energy})"), std::string::npos) << gantry;
  EXPECT_NE(
      ConsumerSnippet(Metadata(v1::EXPORT_PROFILE_GANTRY, v1::EXPORT_FORMAT_PYTORCH), "calo.pt")
          .find("gantry_export.load(\"calo.pt\")"),
      std::string::npos);
}

}  // namespace
}  // namespace gantry::jobspec
