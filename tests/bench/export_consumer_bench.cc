// Per-shower latency of an exported generator in a LibTorch consumer, as a fast-simulation hook
// runs it (torch::jit::load of the TorchScript file, forward on float32 tensors), beside gantry's
// own generation path (ShowerGenerator::GenerateFromNoise) on the same generator, at batch sizes
// 1, 2, 4, ... up to --max_batch, on --threads threads. Prints one row per batch: ms per shower
// and showers per second for each, and their ratio.
// --consumer=optimize: the consumer freezes the module and runs torch::jit::optimize_for_inference
// (oneDNN layouts) before use, as a hook may.
//   export_consumer_bench [--preset=3dgan-25] [--profile=par04|gantry] [--threads=1]
//                         [--max_batch=64] [--showers=64] [--consumer=plain|optimize]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/script.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "jobspec/export_profile.h"
#include "tests/bench/bench_flags.h"
#include "workers/export/model_export.h"
#include "workers/gan/checkpoint.h"
#include "workers/gan/heap_retention.h"
#include "workers/gan/openmp_wait_policy.h"
#include "workers/gan/shower_generator.h"

using gantry::bench::BenchFlag;

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int main(int argc, char** argv) {
  gantry::gan::PreferPassiveOpenMpWait(argv);
  gantry::gan::RetainFreedHeapMemory();
  const std::string preset = BenchFlag(argc, argv, "preset", "3dgan-25");
  const std::string profile_name = BenchFlag(argc, argv, "profile", "par04");
  const int threads = std::atoi(BenchFlag(argc, argv, "threads", "1").c_str());
  const int64_t max_batch = std::atoll(BenchFlag(argc, argv, "max_batch", "64").c_str());
  const int64_t showers = std::atoll(BenchFlag(argc, argv, "showers", "64").c_str());
  const std::string consumer = BenchFlag(argc, argv, "consumer", "plain");
  at::set_num_threads(threads);
  auto profile = gantry::jobspec::ParseExportProfile(profile_name);
  auto config = gantry::gan::PresetConfig(preset);
  if (!profile.ok() || !config.ok()) {
    std::cerr << "bad --profile or --preset\n";
    return 1;
  }
  auto state = gantry::gan::NewTrainingState(*config, 1);
  if (!state.ok()) {
    std::cerr << state.status() << "\n";
    return 1;
  }
  state->generator->eval();
  auto exported = gantry::exporter::ExportGenerator(
      state->config, *state->generator, gantry::exporter::ExportFormat::kTorchScript, *profile);
  if (!exported.ok()) {
    std::cerr << exported.status() << "\n";
    return 1;
  }
  std::istringstream bytes(exported->bytes);
  torch::jit::Module module = torch::jit::load(bytes);
  module.eval();
  if (consumer == "optimize") module = torch::jit::optimize_for_inference(module);
  gantry::gan::ShowerGenerator gantry_path(state->config, state->generator);
  const int64_t noise = gantry_path.noise_dim();
  const bool par04 = *profile == gantry::v1::EXPORT_PROFILE_PAR04;
  const bool variable = state->config.variable_angle();

  std::printf(
      "# %s, %s profile, TorchScript (%s) in LibTorch %d.%d vs gantry's "
      "ShowerGenerator, %d thread(s), %lld showers per point\n",
      preset.c_str(), profile_name.c_str(), consumer.c_str(), TORCH_VERSION_MAJOR,
      TORCH_VERSION_MINOR, threads, static_cast<long long>(showers));
  std::printf("%6s %14s %14s %12s %12s %8s\n", "batch", "export ms/sh", "gantry ms/sh",
              "export sh/s", "gantry sh/s", "ratio");
  c10::InferenceMode guard;
  for (int64_t batch = 1; batch <= max_batch; batch *= 2) {
    const at::Tensor latent = at::randn({batch, noise});
    const at::Tensor energy = at::rand({batch, 1}) * 190 + 10;
    const at::Tensor theta = at::full({batch, 1}, 1.5707963f);
    std::vector<c10::IValue> inputs;
    if (par04) {
      inputs.push_back(at::cat(
          {latent, energy * 1000 / gantry::jobspec::kPar04MaxEnergyMev,
           theta / gantry::jobspec::kPar04MaxAngleRad, at::zeros({batch, 1}), at::ones({batch, 1})},
          1));
    } else {
      inputs = {latent, energy};
      if (variable) inputs.push_back(theta);
    }
    std::vector<float> out(static_cast<size_t>(batch * gantry_path.cells_per_shower()));
    const std::vector<float> e(energy.data_ptr<float>(), energy.data_ptr<float>() + batch);
    const std::vector<float> t(theta.data_ptr<float>(), theta.data_ptr<float>() + batch);
    const std::vector<float> z(latent.data_ptr<float>(), latent.data_ptr<float>() + latent.numel());
    auto run_gantry = [&] {
      absl::Status s =
          gantry_path.GenerateFromNoise(e, variable ? t : std::vector<float>{}, z, out.data());
      if (!s.ok()) std::abort();
    };
    const int64_t calls = std::max<int64_t>(1, showers / batch);
    module.forward(inputs);  // warm-up (TorchScript profiles and optimises on its first runs)
    module.forward(inputs);
    run_gantry();
    auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < calls; ++i) module.forward(inputs);
    const double export_ms = 1000 * Seconds(start) / (calls * batch);
    start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < calls; ++i) run_gantry();
    const double gantry_ms = 1000 * Seconds(start) / (calls * batch);
    std::printf("%6lld %14.2f %14.2f %12.1f %12.1f %8.2f\n", static_cast<long long>(batch),
                export_ms, gantry_ms, 1000 / export_ms, 1000 / gantry_ms, export_ms / gantry_ms);
    std::fflush(stdout);
  }
  return 0;
}
