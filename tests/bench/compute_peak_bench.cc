// The machine's attainable multiply-add rate in float32 and bfloat16 through LibTorch's kernels (a
// square matrix product, the best case for oneDNN/BLAS) and through the 3dgan-25 generator's own
// convolution shapes, for the "floor" of generation speed in docs/BENCHMARKS.md. Also prints the
// generator's multiply-adds per shower, layer by layer, as the reference graph has them and as
// gantry computes them (upsampling stages as polyphase convolutions).
//   compute_peak_bench [--threads=2] [--size=2048] [--iters=10]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "tests/bench/bench_flags.h"
#include "workers/gan/generator.h"
#include "jobspec/model_config.h"

using gantry::bench::BenchFlag;

namespace {

template <typename F>
double BestSeconds(int iters, const F& f) {
  f();  // warm-up (oneDNN primitive creation)
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

int64_t FloorDiv(int64_t n, int64_t d) { return n >= 0 ? n / d : -((-n + d - 1) / d); }

struct LayerCount {
  std::string name;
  int64_t literal = 0;    // multiply-adds per shower of the reference graph
  int64_t polyphase = 0;  // as gantry computes it
};

// Per-shower multiply-adds of the 3dgan-25 generator (dense, then the conv stages).
std::vector<LayerCount> CountMacs(const gantry::gan::ModelConfig& c) {
  std::vector<LayerCount> out;
  const std::array<int64_t, 4> dense = {c.dense_channels, 7, 7, 8};
  const int64_t dense_out = dense[0] * dense[1] * dense[2] * dense[3];
  out.push_back({"dense " + std::to_string(c.latent) + "->" + std::to_string(dense_out),
                 c.latent * dense_out, c.latent * dense_out});
  std::array<int64_t, 3> grid = {dense[1], dense[2], dense[3]};
  int i = 0;
  for (const gantry::gan::ConvStageSpec& s : gantry::gan::GeneratorStages(c)) {
    std::array<int64_t, 3> out_grid{}, q{}, taps{};
    int64_t phases = 1;
    for (int a = 0; a < 3; ++a) {
      const int64_t f = static_cast<int64_t>(s.upsample[a]);
      const int64_t before = s.pad[a][0];
      out_grid[a] = grid[a] * f + before + s.pad[a][1] - s.kernel[a] + 1;
      q[a] = (out_grid[a] + f - 1) / f;
      taps[a] = FloorDiv(f - 1 + s.kernel[a] - 1 - before, f) - FloorDiv(-before, f) + 1;
      phases *= f;
    }
    const int64_t kvol = s.kernel[0] * s.kernel[1] * s.kernel[2];
    const int64_t literal =
        out_grid[0] * out_grid[1] * out_grid[2] * s.out_channels * s.in_channels * kvol;
    const int64_t poly = phases == 1 ? literal
                                     : q[0] * q[1] * q[2] * s.out_channels * phases *
                                           s.in_channels * taps[0] * taps[1] * taps[2];
    out.push_back({"stage" + std::to_string(i++) + " conv " + std::to_string(s.in_channels) + "->" +
                       std::to_string(s.out_channels) + " on " + std::to_string(out_grid[0]) + "x" +
                       std::to_string(out_grid[1]) + "x" + std::to_string(out_grid[2]),
                   literal, poly});
    grid = out_grid;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = std::atoi(BenchFlag(argc, argv, "threads", "2").c_str());
  const int64_t size = std::atoll(BenchFlag(argc, argv, "size", "2048").c_str());
  const int iters = std::atoi(BenchFlag(argc, argv, "iters", "10").c_str());
  at::set_num_threads(threads);
  c10::InferenceMode guard;

  auto config = gantry::gan::PresetConfig("3dgan-25");
  if (!config.ok()) {
    std::cerr << config.status() << "\n";
    return 1;
  }
  int64_t literal = 0, poly = 0;
  for (const LayerCount& l : CountMacs(*config)) {
    std::cout << "MACS " << l.name << ": " << l.literal << " per shower (reference graph), "
              << l.polyphase << " (gantry)\n";
    literal += l.literal;
    poly += l.polyphase;
  }
  std::cout << "RESULT macs-per-shower 3dgan-25 " << literal << " reference, " << poly
            << " gantry\n";

  for (at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    const char* name = type == at::kFloat ? "fp32" : "bf16";
    const at::Tensor a = at::randn({size, size}).to(type);
    const at::Tensor b = at::randn({size, size}).to(type);
    const double s = BestSeconds(iters, [&] { at::mm(a, b); });
    std::cout << "RESULT peak-matmul " << name << " " << 1e-9 * size * size * size / s
              << " GMAC/s (" << size << "^3, " << threads << " threads)\n";
    // The generator's first conv (8->64 channels, 6x6x8 kernel, 7x7x8 grid, 'same' padding) at
    // batch 128: its largest layer in gantry's arithmetic.
    const at::Tensor x = at::randn({128, 8, 12, 12, 15}).to(type);
    const at::Tensor w = at::randn({64, 8, 6, 6, 8}).to(type);
    const double sc = BestSeconds(iters, [&] { at::conv3d(x, w); });
    std::cout << "RESULT peak-conv " << name << " "
              << 1e-9 * 128.0 * 7 * 7 * 8 * 64 * 8 * 6 * 6 * 8 / sc
              << " GMAC/s (3dgan-25 stage0 shape, batch 128)\n";
  }
  return 0;
}
