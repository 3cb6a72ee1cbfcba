// Training speed of a 3DGAN: samples per second of the full reference iteration (D on
// real, D on fake, two G updates) at a given batch and thread count, on random preprocessed data
// (the same input as pytorch_3dgan.py train). run_gan_bench.sh runs both side by side.
//   gan_training_bench [--preset=3dgan-25] [--batch=64] [--threads=2] [--iters=3]
//                      [--few_channel_forward=auto|direct|folded]   (A/B of SetFewChannelForward)
#include <ATen/ATen.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "tests/bench/bench_flags.h"
#include "workers/gan/conv_stage.h"
#include "workers/gan/heap_retention.h"
#include "workers/gan/openmp_wait_policy.h"
#include "workers/gan/trainer.h"

using gantry::bench::BenchFlag;

int main(int argc, char** argv) {
  gantry::gan::PreferPassiveOpenMpWait(argv);  // as gantry-worker does
  gantry::gan::RetainFreedHeapMemory();        // large tensors reuse faulted-in pages
  const std::string preset = BenchFlag(argc, argv, "preset", "3dgan-25");
  const int64_t batch = std::atoll(BenchFlag(argc, argv, "batch", "64").c_str());
  const int threads = std::atoi(BenchFlag(argc, argv, "threads", "2").c_str());
  const int iters = std::atoi(BenchFlag(argc, argv, "iters", "3").c_str());
  const int warmup = std::atoi(BenchFlag(argc, argv, "warmup", "1").c_str());
  const std::string forward = BenchFlag(argc, argv, "few_channel_forward", "auto");
  if (forward == "direct") {
    gantry::gan::SetFewChannelForward(gantry::gan::FewChannelForward::kDirect);
  } else if (forward == "folded") {
    gantry::gan::SetFewChannelForward(gantry::gan::FewChannelForward::kTapFolded);
  } else if (forward != "auto") {
    std::cerr << "--few_channel_forward must be auto, direct or folded, got " << forward << "\n";
    return 1;
  }
  auto config = gantry::gan::PresetConfig(preset);
  if (!config.ok() || config->variable_angle()) {
    std::cerr << "preset must be a fixed-angle preset (3dgan-25, tiny)\n";
    return 1;
  }
  auto state = gantry::gan::NewTrainingState(*config, 1);
  if (!state.ok()) {
    std::cerr << state.status() << "\n";
    return 1;
  }
  at::manual_seed(1);
  gantry::gan::TrainingTensors data;
  data.images = at::rand({batch, 1, 25, 25, 25}) * 0.01;
  data.energy100 = at::rand({batch, 1}) * 4.9 + 0.1;
  data.ecal = data.images.sum({1, 2, 3, 4}).unsqueeze(1);
  gantry::gan::TrainerOptions options;
  options.batch_size = batch;
  options.threads = threads;
  auto trainer =
      gantry::gan::Trainer::CreateFromTensors(*std::move(state), std::move(data), options);
  if (!trainer.ok()) {
    std::cerr << trainer.status() << "\n";
    return 1;
  }
  double seconds = 0;
  for (int i = 0; i < warmup + iters; ++i) {
    auto step = (*trainer)->Step();
    if (!step.ok()) {
      std::cerr << step.status() << "\n";
      return 1;
    }
    if (i >= warmup) seconds += step->seconds;
  }
  std::cout << "RESULT train " << preset << " " << iters * batch / seconds << " samples/s (batch "
            << batch << ", " << threads << " threads)\n";
  return 0;
}
