// Generation speed of a 3DGAN generator: milliseconds per shower at a given batch and
// thread count, the network alone and the full ShowerGenerator path (noise, conditioning, GeV
// conversion, copy out). Compare with pytorch_3dgan.py (run_gan_bench.sh runs both).
//   gan_generation_bench [--preset=3dgan-25] [--batch=128] [--threads=2] [--iters=10]
//                        [--precision=fp32|bf16]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "tests/bench/bench_flags.h"
#include "workers/gan/generator.h"
#include "workers/gan/heap_retention.h"
#include "workers/gan/openmp_wait_policy.h"
#include "workers/gan/shower_generator.h"

using gantry::bench::BenchFlag;

int main(int argc, char** argv) {
  gantry::gan::PreferPassiveOpenMpWait(argv);  // as gantry-worker does
  gantry::gan::RetainFreedHeapMemory();        // large tensors reuse faulted-in pages
  using gantry::gan::Generator;
  const std::string preset = BenchFlag(argc, argv, "preset", "3dgan-25");
  const int64_t batch = std::atoll(BenchFlag(argc, argv, "batch", "128").c_str());
  const int threads = std::atoi(BenchFlag(argc, argv, "threads", "2").c_str());
  const int iters = std::atoi(BenchFlag(argc, argv, "iters", "10").c_str());
  const int warmup = std::atoi(BenchFlag(argc, argv, "warmup", "2").c_str());
  const std::string precision = BenchFlag(argc, argv, "precision", "fp32");
  if (precision != "fp32" && precision != "bf16") {
    std::cerr << "--precision: fp32 or bf16\n";
    return 1;
  }
  const bool bf16 = precision == "bf16";
  at::set_num_threads(threads);
  auto config = gantry::gan::PresetConfig(preset);
  if (!config.ok()) {
    std::cerr << config.status() << "\n";
    return 1;
  }
  at::manual_seed(1);
  Generator g(*config);
  g->eval();
  double net_ms = 0;
  {
    c10::InferenceMode guard;
    const at::Tensor energy = at::rand({batch, 1}) * 4.9 + 0.1;
    const at::Tensor theta = at::full({batch, 1}, 1.57);
    at::Tensor input = g->MakeInput(energy, theta, at::randn({batch, g->noise_dim()}));
    if (bf16) input = input.to(at::kBFloat16);
    for (int i = 0; i < warmup; ++i) g->forward(input);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) g->forward(input);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    net_ms = 1000.0 * s / (iters * batch);
  }
  gantry::gan::ShowerGenerator runner(*config, g);
  gantry::gan::GenerationRequest request;
  request.batch_size = batch;
  if (bf16) request.precision = gantry::gan::GenerationPrecision::kBFloat16;
  request.energy_gev.assign(static_cast<size_t>(batch * iters), 100.0f);
  if (config->variable_angle()) request.theta_rad.assign(request.energy_gev.size(), 1.57f);
  const auto start = std::chrono::steady_clock::now();
  auto showers = runner.Generate(request);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!showers.ok()) {
    std::cerr << showers.status() << "\n";
    return 1;
  }
  std::cout << "RESULT generate " << preset << " " << net_ms << " ms/shower (network, batch "
            << batch << ", " << threads << " threads, " << precision << ")\n";
  std::cout << "RESULT generate-end-to-end " << preset << " "
            << 1000.0 * s / static_cast<double>(request.energy_gev.size())
            << " ms/shower (ShowerGenerator incl. GeV conversion, " << precision << ")\n";
  return 0;
}
