// export_fixture: writes a generator's ONNX and PyTorch exports next to inputs and the showers
// gantry's own ShowerGenerator (the serving path, GenerateFromNoise) makes from them, for the
// Python (onnx checker, PyTorch rebuild) and ONNX Runtime checks of tests/export.
//
//   export_fixture --out_dir=DIR [--checkpoint=FILE | --preset=P --model_set=K=V;...] [--count=N]
//
// Without --checkpoint the generator is freshly initialised and its BatchNorm affine parameters
// and running statistics are randomised, so the eval-mode BatchNorm is really exercised (and the
// last conv's weights made non-negative, see below). Files:
// model.onnx, model.pt, model.ts (TorchScript) in the gantry profile, model.par04.onnx and
// model.par04.ts in the par04 profile, model.ddml.ts in the ddml profile (fixed-angle models),
// latent.f32 [N, noise], energy.f32 [N] GeV, theta.f32 [N] rad (variable angle), expected.f32
// [N, x, y, z] GeV, meta.json.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "base/flags.h"
#include "workers/export/model_export.h"
#include "workers/gan/checkpoint.h"
#include "workers/gan/shower_generator.h"

ABSL_FLAG(std::string, out_dir, "", "folder for the files");
ABSL_FLAG(std::string, checkpoint, "", "checkpoint to export (default: a fresh generator)");
ABSL_FLAG(std::string, preset, "tiny", "preset of the fresh generator");
ABSL_FLAG(std::string, model_set, "", "key=value;... overrides of the fresh generator's config");
ABSL_FLAG(int64_t, count, 5, "showers");
ABSL_FLAG(uint64_t, seed, 7, "seed of the inputs and the fresh generator");

namespace {

bool WriteFile(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  return static_cast<bool>(out);
}

bool WriteTensor(const std::string& path, const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return WriteFile(path, c.data_ptr<float>(), sizeof(float) * static_cast<size_t>(c.numel()));
}

int Fail(const std::string& what) {
  std::cerr << "export_fixture: " << what << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> positional =
      gantry::ParseFlags(argc, argv, "export_fixture --out_dir=DIR [--checkpoint=FILE]");
  if (!positional.empty()) return Fail("unexpected argument " + positional.front());
  const std::string dir = absl::GetFlag(FLAGS_out_dir);
  const int64_t n = absl::GetFlag(FLAGS_count);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  if (dir.empty() || n < 1) return Fail("--out_dir and --count >= 1 are required");

  gantry::gan::ModelConfig config;
  gantry::gan::Generator generator{nullptr};
  if (!absl::GetFlag(FLAGS_checkpoint).empty()) {
    auto state = gantry::gan::ReadCheckpoint(absl::GetFlag(FLAGS_checkpoint), false);
    if (!state.ok()) return Fail(state.status().ToString());
    config = state->config;
    generator = state->generator;
  } else {
    auto preset = gantry::gan::PresetConfig(absl::GetFlag(FLAGS_preset));
    if (!preset.ok()) return Fail(preset.status().ToString());
    auto overridden = gantry::gan::OverrideModelConfig(*preset, absl::GetFlag(FLAGS_model_set));
    if (!overridden.ok()) return Fail(overridden.status().ToString());
    auto state = gantry::gan::NewTrainingState(*overridden, seed);
    if (!state.ok()) return Fail(state.status().ToString());
    config = state->config;
    generator = state->generator;
    at::Generator rng = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
    c10::InferenceMode guard;
    for (auto& item : generator->named_buffers()) {
      at::Tensor b = item.value();
      if (item.key().find("running_mean") != std::string::npos) b.normal_(0.0, 0.3, rng);
      if (item.key().find("running_var") != std::string::npos) b.uniform_(0.5, 2.0, rng);
    }
    for (auto& item : generator->named_parameters()) {
      at::Tensor p = item.value();
      if (item.key().find(".bn.weight") != std::string::npos) p.uniform_(0.5, 1.5, rng);
      if (item.key().find(".bn.bias") != std::string::npos) p.normal_(0.0, 0.2, rng);
      if (item.key() == "shower_template") {  // a fresh one is 0
        p[0].uniform_(0.0, 1.0, rng);
        p[1].normal_(0.0, 0.3, rng);
        if (p.size(0) > 2) p.narrow(0, 2, p.size(0) - 2).normal_(0.0, 0.1, rng);  // the modes
      }
    }
    // The last conv's weights made non-negative: its input is >= 0 (ReLU, BatchNorm aside), so each
    // shower cell is a sum of non-negative terms. Otherwise a fresh 3dgan-51 generator's showers
    // are a few cells just above the final ReLU, differences of large terms whose float32 rounding
    // is ~1e-4 relative in any implementation (PyTorch, ONNX Runtime and gantry alike, measured
    // against float64), which would hide what the tests look for.
    const std::string last =
        absl::StrCat("stage", gantry::gan::GeneratorStages(config).size() - 1, ".conv.weight");
    for (auto& item : generator->named_parameters()) {
      if (item.key() == last) item.value().abs_();
    }
  }
  gantry::gan::ShowerGenerator shower_generator(config, generator);

  at::Generator rng = at::make_generator<at::CPUGeneratorImpl>(seed + 2);
  const at::Tensor latent = at::randn({n, shower_generator.noise_dim()}, rng, at::kFloat);
  const at::Tensor energy = at::empty({n}, at::kFloat).uniform_(10.0, 200.0, rng);
  const at::Tensor theta = at::empty({n}, at::kFloat).uniform_(1.1, 2.0, rng);
  std::vector<float> expected(static_cast<size_t>(n * shower_generator.cells_per_shower()));
  absl::Status s = shower_generator.GenerateFromNoise(
      {energy.data_ptr<float>(), static_cast<size_t>(n)},
      {theta.data_ptr<float>(), config.variable_angle() ? static_cast<size_t>(n) : 0},
      {latent.data_ptr<float>(), static_cast<size_t>(latent.numel())}, expected.data());
  if (!s.ok()) return Fail(s.ToString());

  using gantry::exporter::ExportFormat;
  struct File {
    const char* name;
    ExportFormat format;
    gantry::v1::ExportProfile profile;
  };
  std::vector<File> files = {
      {"model.onnx", ExportFormat::kOnnx, gantry::v1::EXPORT_PROFILE_GANTRY},
      {"model.pt", ExportFormat::kPytorch, gantry::v1::EXPORT_PROFILE_GANTRY},
      {"model.ts", ExportFormat::kTorchScript, gantry::v1::EXPORT_PROFILE_GANTRY},
      {"model.par04.onnx", ExportFormat::kOnnx, gantry::v1::EXPORT_PROFILE_PAR04},
      {"model.par04.ts", ExportFormat::kTorchScript, gantry::v1::EXPORT_PROFILE_PAR04}};
  // DDML's regular-grid GAN model has no angle input: fixed-angle models only.
  if (!config.variable_angle()) {
    files.push_back({"model.ddml.ts", ExportFormat::kTorchScript, gantry::v1::EXPORT_PROFILE_DDML});
  }
  for (const File& f : files) {
    auto exported = gantry::exporter::ExportGenerator(config, *generator, f.format, f.profile);
    if (!exported.ok()) return Fail(exported.status().ToString());
    if (!WriteFile(dir + "/" + f.name, exported->bytes.data(), exported->bytes.size())) {
      return Fail("cannot write");
    }
  }
  bool ok = WriteTensor(dir + "/latent.f32", latent) && WriteTensor(dir + "/energy.f32", energy) &&
            WriteFile(dir + "/expected.f32", expected.data(), sizeof(float) * expected.size());
  if (config.variable_angle()) ok = ok && WriteTensor(dir + "/theta.f32", theta);
  const std::string meta =
      absl::StrCat("{\"count\":", n, ",\"noise_dim\":", shower_generator.noise_dim(), ",\"grid\":[",
                   config.grid[0], ",", config.grid[1], ",", config.grid[2],
                   "],\"variable_angle\":", config.variable_angle() ? "true" : "false",
                   ",\"preset\":\"", config.preset, "\"}\n");
  ok = ok && WriteFile(dir + "/meta.json", meta.data(), meta.size());
  if (!ok) return Fail("cannot write the files");
  std::cout << "wrote " << dir << "\n";
  return 0;
}
