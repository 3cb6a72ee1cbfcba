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
#include "workers/gan/checkpoint.h"

namespace gantry::exporter {
namespace {

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
  absl::StatusOr<ExportFormat> bad = ParseExportFormat("tflite");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("use onnx or pytorch"), std::string::npos);
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
    absl::StatusOr<std::string> a =
        ExportGenerator(state.config, *state.generator, ExportFormat::kOnnx);
    absl::StatusOr<std::string> b =
        ExportGenerator(state.config, *state.generator, ExportFormat::kOnnx);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(*a, *b) << "the same generator must give the same bytes";
    onnx::ModelProto model;
    ASSERT_TRUE(model.ParseFromString(*a));
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

TEST(ExportPytorch, IsAZipArchive) {
  gan::TrainingState state = Fresh("tiny");
  absl::StatusOr<std::string> bytes =
      ExportGenerator(state.config, *state.generator, ExportFormat::kPytorch);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_GT(bytes->size(), 4u);
  EXPECT_EQ(bytes->substr(0, 2), "PK");
}

TEST(ExportCheckpoint, MissingFileIsNotFound) {
  EXPECT_EQ(ExportCheckpoint("/nonexistent/model.ckpt", ExportFormat::kOnnx).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gantry::exporter
