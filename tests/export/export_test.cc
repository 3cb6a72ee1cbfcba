// Unit tests of workers/export: format names, the checks of DescribeGenerator, and properties of
// the bytes (deterministic, the documented graph interface, a zip archive for PyTorch).
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "workers/export/generator_description.h"
#include "workers/export/model_export.h"
#include "workers/export/onnx_export.h"
#include "workers/export/torchscript_export.h"
#include "workers/gan/checkpoint.h"

namespace gantry::exporter {
namespace {

namespace v1 = ::gantry::v1;

gan::TrainingState Fresh(const std::string& preset, const std::string& overrides = "") {
  auto config = gan::OverrideModelConfig(*gan::PresetConfig(preset), overrides);
  EXPECT_TRUE(config.ok()) << config.status();
  auto state = gan::NewTrainingState(*config, 3);
  EXPECT_TRUE(state.ok()) << state.status();
  return std::move(*state);
}

TEST(ExportFormat, NamesAndRefusal) {
  EXPECT_EQ(*ParseExportFormat("onnx"), ExportFormat::kOnnx);
  EXPECT_EQ(*ParseExportFormat("pytorch"), ExportFormat::kPytorch);
  EXPECT_EQ(*ParseExportFormat("torchscript"), ExportFormat::kTorchScript);
  absl::StatusOr<ExportFormat> bad = ParseExportFormat("tflite");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("use onnx, pytorch or torchscript"), std::string::npos);
}

TEST(DescribeGenerator, RefusesAConfigTheGeneratorWasNotBuiltFrom) {
  gan::TrainingState state = Fresh("tiny");
  gan::ModelConfig other = state.config;
  other.latent = 20;  // the generator's dense layer reads 16
  absl::StatusOr<GeneratorDescription> d = DescribeGenerator(other, *state.generator);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("dense.weight"), std::string::npos) << d.status();
  other = state.config;
  other.generator_filters = {0, 4, 4};
  EXPECT_EQ(DescribeGenerator(other, *state.generator).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A model with a shower template describes it and its modes, and its tensor must have the grid's
// shape.
TEST(DescribeGenerator, CarriesTheShowerTemplate) {
  gan::TrainingState state = Fresh("tiny-template");
  absl::StatusOr<GeneratorDescription> d = DescribeGenerator(state.config, *state.generator);
  ASSERT_TRUE(d.ok()) << d.status();
  const int64_t modes = state.config.template_modes;
  ASSERT_GT(modes, 0);
  EXPECT_EQ(d->Find("shower_template").sizes().vec(),
            (std::vector<int64_t>{2 + modes, 25, 25, 25}));
  EXPECT_NE(DescriptionJson(*d).find("\"shower_template\":true"), std::string::npos);
  EXPECT_NE(DescriptionJson(*d).find(absl::StrCat("\"template_modes\":", modes)),
            std::string::npos);
  gan::ModelConfig fewer_modes = state.config;
  fewer_modes.template_modes = modes - 1;
  EXPECT_EQ(DescribeGenerator(fewer_modes, *state.generator).status().code(),
            absl::StatusCode::kInvalidArgument);
  gan::TrainingState tiny = Fresh("tiny");
  EXPECT_NE(DescriptionJson(*DescribeGenerator(tiny.config, *tiny.generator))
                .find("\"shower_template\":false"),
            std::string::npos);
  gan::ModelConfig other_grid = state.config;
  other_grid.grid = {25, 25, 24};
  EXPECT_EQ(DescribeGenerator(other_grid, *state.generator).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ExportOnnx, DocumentedInterfaceAndDeterministicBytes) {
  for (const std::string& preset : {"tiny", "3dgan-51"}) {
    gan::TrainingState state =
        Fresh(preset, preset == "tiny" ? "" : "latent=6;generator_filters=2,2,2,2,2,2");
    absl::StatusOr<ExportedModel> a =
        ExportGenerator(state.config, *state.generator, ExportFormat::kOnnx);
    absl::StatusOr<ExportedModel> b =
        ExportGenerator(state.config, *state.generator, ExportFormat::kOnnx);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->bytes, b->bytes) << "the same generator must give the same bytes";
    onnx::ModelProto model;
    ASSERT_TRUE(model.ParseFromString(a->bytes));
    ASSERT_EQ(model.opset_import_size(), 1);
    EXPECT_EQ(model.opset_import(0).version(), kOnnxOpset);
    const bool variable = preset == "3dgan-51";
    ASSERT_EQ(model.graph().input_size(), variable ? 3 : 2);
    EXPECT_EQ(model.graph().input(0).name(), "latent");
    EXPECT_EQ(model.graph().input(0).type().tensor_type().shape().dim(1).dim_value(),
              variable ? 4 : 16);
    EXPECT_EQ(model.graph().input(1).name(), "energy");
    if (variable) EXPECT_EQ(model.graph().input(2).name(), "theta");
    ASSERT_EQ(model.graph().output_size(), 1);
    const auto& out = model.graph().output(0);
    EXPECT_EQ(out.name(), "shower");
    ASSERT_EQ(out.type().tensor_type().shape().dim_size(), 4);
    EXPECT_EQ(out.type().tensor_type().shape().dim(0).dim_param(), "N");
    EXPECT_EQ(out.type().tensor_type().shape().dim(1).dim_value(), variable ? 51 : 25);
    EXPECT_EQ(out.type().tensor_type().shape().dim(3).dim_value(), 25);
    bool pow = false;
    for (const auto& node : model.graph().node()) pow = pow || node.op_type() == "Pow";
    EXPECT_EQ(pow, variable) << "only 3dgan-51 (cell_power 0.85) undoes a power";
  }
}

// A generator with spot sampling exports in no format: the graph would give its expected showers
// without the spots; nor one with a relative residual or a network without noise, which the graph
// does not describe.
TEST(ExportGenerator, SpotSamplingIsRefused) {
  gan::TrainingState state = Fresh("tiny-template", "generator_spots=1");
  state.config.generator_spot_gev = 0.002;
  for (ExportFormat format : {ExportFormat::kOnnx, ExportFormat::kPytorch}) {
    const absl::Status s = ExportGenerator(state.config, *state.generator, format).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("generator_spots"), std::string::npos) << s;
  }
  gan::TrainingState relative = Fresh("tiny-template", "template_relative_residual=1");
  const absl::Status s =
      ExportGenerator(relative.config, *relative.generator, ExportFormat::kOnnx).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("template_relative_residual"), std::string::npos) << s;
  gan::TrainingState noiseless = Fresh("tiny-template", "template_residual_noise=0");
  const absl::Status n =
      ExportGenerator(noiseless.config, *noiseless.generator, ExportFormat::kOnnx).status();
  EXPECT_EQ(n.code(), absl::StatusCode::kFailedPrecondition) << n;
  EXPECT_NE(n.message().find("template_residual_noise"), std::string::npos) << n;
}

TEST(ExportPytorch, IsAZipArchive) {
  gan::TrainingState state = Fresh("tiny");
  absl::StatusOr<ExportedModel> exported =
      ExportGenerator(state.config, *state.generator, ExportFormat::kPytorch);
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_GT(exported->bytes.size(), 4u);
  EXPECT_EQ(exported->bytes.substr(0, 2), "PK");
}

// The par04 profile's ONNX graph: one packed input [N, L + 4] and a flat output of fractions.
TEST(ExportOnnx, Par04ProfilePacksLatentAndConditionsIntoOneInput) {
  gan::TrainingState state = Fresh("tiny");
  absl::StatusOr<ExportedModel> e = ExportGenerator(state.config, *state.generator,
                                                    ExportFormat::kOnnx, v1::EXPORT_PROFILE_PAR04);
  ASSERT_TRUE(e.ok()) << e.status();
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(e->bytes));
  ASSERT_EQ(model.graph().input_size(), 1);
  EXPECT_EQ(model.graph().input(0).name(), "input");
  EXPECT_EQ(model.graph().input(0).type().tensor_type().shape().dim(1).dim_value(), 16 + 4);
  ASSERT_EQ(model.graph().output_size(), 1);
  const auto& shape = model.graph().output(0).type().tensor_type().shape();
  ASSERT_EQ(shape.dim_size(), 2);
  EXPECT_EQ(shape.dim(1).dim_value(), 25 * 25 * 25);
  ASSERT_EQ(e->inputs.size(), 1u);
  EXPECT_EQ(e->inputs[0].shape, (std::vector<int64_t>{-1, 20}));
  EXPECT_EQ(e->grid, (std::vector<int64_t>{25, 25, 25}));
}

// Each profile in each format it is not written in, and a model a profile cannot represent, is
// refused with a message naming what to use instead.
TEST(ExportProfiles, RefusalsNameWhatToUse) {
  gan::TrainingState fixed = Fresh("tiny");
  auto refused = [&](gan::TrainingState& s, ExportFormat format, v1::ExportProfile profile) {
    return ExportGenerator(s.config, *s.generator, format, profile).status();
  };
  absl::Status s = refused(fixed, ExportFormat::kOnnx, v1::EXPORT_PROFILE_DDML);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("give format torchscript"), std::string::npos) << s;
  s = refused(fixed, ExportFormat::kPytorch, v1::EXPORT_PROFILE_PAR04);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("give format onnx or torchscript"), std::string::npos) << s;
  s = refused(fixed, ExportFormat::kTorchScript, static_cast<v1::ExportProfile>(9));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  gan::TrainingState variable = Fresh("3dgan-51", "latent=6;generator_filters=2,2,2,2,2,2");
  s = refused(variable, ExportFormat::kTorchScript, v1::EXPORT_PROFILE_DDML);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("with profile par04 or gantry"), std::string::npos) << s;
  EXPECT_TRUE(refused(variable, ExportFormat::kTorchScript, v1::EXPORT_PROFILE_PAR04).ok());
}

// The TorchScript source is plain text a reviewer can read: every profile's forward, the
// generate() they share, and the profile constants.
TEST(ExportTorchScript, SourceOfEachProfile) {
  gan::TrainingState state = Fresh("tiny-template");
  absl::StatusOr<GeneratorDescription> d = DescribeGenerator(state.config, *state.generator);
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string gantry = *TorchScriptSource(*d, v1::EXPORT_PROFILE_GANTRY);
  EXPECT_NE(gantry.find("def generate(self, latent: Tensor, energy: Tensor) -> Tensor:"),
            std::string::npos)
      << gantry;
  EXPECT_NE(gantry.find("self.shower_template_modes"), std::string::npos) << gantry;
  const std::string par04 = *TorchScriptSource(*d, v1::EXPORT_PROFILE_PAR04);
  EXPECT_NE(par04.find("def forward(self, input: Tensor) -> Tensor:"), std::string::npos);
  EXPECT_NE(par04.find("* 1024.0"), std::string::npos) << par04;
  const std::string ddml = *TorchScriptSource(*d, v1::EXPORT_PROFILE_DDML);
  EXPECT_NE(ddml.find("torch.erfinv"), std::string::npos) << ddml;
  EXPECT_NE(ddml.find("permute([0, 3, 1, 2])"), std::string::npos) << ddml;
  absl::StatusOr<ExportedModel> a = ExportGenerator(state.config, *state.generator,
                                                    ExportFormat::kTorchScript);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->bytes.substr(0, 2), "PK");
}

TEST(ExportCheckpoint, MissingFileIsNotFound) {
  EXPECT_EQ(ExportCheckpoint("/nonexistent/model.ckpt", ExportFormat::kOnnx).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gantry::exporter
