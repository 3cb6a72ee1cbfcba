// The rank's device (workers/gan/device.h) on the CPU: parsing, the refusal of a device this build
// or machine lacks, and the CPU device running through the same code as a GPU (the GPU itself is
// checked by tests/gpu on a machine that has one).
#include "workers/gan/device.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "absl/types/span.h"
#include "tests/gan/test_data.h"
#include "workers/gan/bf16_support.h"
#include "workers/gan/checkpoint.h"
#include "workers/gan/shower_generator.h"
#include "workers/gan/trainer.h"

namespace gantry::gan {
namespace {

const showers::ShowerSet& Showers() {
  static const showers::ShowerSet* set = new showers::ShowerSet(testing::FixedAngleShowers(12));
  return *set;
}

TrainerOptions Options(uint64_t seed) {
  TrainerOptions o;
  o.batch_size = 2;
  o.max_steps_per_epoch = 3;
  o.seed = seed;
  o.threads = 1;
  return o;
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::getpid()) + ".ckpt"))
      .string();
}

bool BitIdentical(const TrainingState& a, const TrainingState& b) {
  const auto wa = testing::Weights(a), wb = testing::Weights(b);
  if (wa.size() != wb.size()) return false;
  for (size_t i = 0; i < wa.size(); ++i) {
    if (!at::equal(wa[i], wb[i])) return false;
  }
  return true;
}

// A cuda device this process cannot use: any in a CPU LibTorch (this machine's), the one past the
// last otherwise.
c10::Device MissingCudaDevice() {
  if (!at::hasCUDA()) return c10::Device(c10::kCUDA, 0);
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(torch::cuda::device_count()));
}

TEST(DeviceTest, ParsesCpuAndCudaIndices) {
  for (const char* text : {"", "cpu"}) {
    absl::StatusOr<c10::Device> d = ParseDevice(text);
    ASSERT_TRUE(d.ok()) << text << ": " << d.status();
    EXPECT_TRUE(d->is_cpu());
    EXPECT_EQ(DeviceName(*d), "cpu");
  }
  absl::StatusOr<c10::Device> d = ParseDevice("cuda:3");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->is_cuda());
  EXPECT_EQ(d->index(), 3);
  EXPECT_EQ(DeviceName(*d), "cuda:3");
  EXPECT_TRUE(ParseDevice("cuda:127").ok());
}

TEST(DeviceTest, RefusesOtherSpellingsNamingTheField) {
  for (const char* text : {"gpu", "gpu:0", "cuda", "cuda:", "cuda:-1", "cuda:+1", "cuda:x",
                           "cuda:128", "CPU", "cuda:0,1", "mps"}) {
    absl::StatusOr<c10::Device> d = ParseDevice(text, "--device");
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(d.status().message().find("--device"), std::string::npos) << d.status();
    EXPECT_NE(d.status().message().find("cuda:N"), std::string::npos) << d.status();
  }
}

TEST(DeviceTest, CpuIsUsableAndAMissingCudaDeviceIsRefused) {
  EXPECT_TRUE(DeviceUsable(c10::Device(c10::kCPU)).ok());
  const absl::Status missing = DeviceUsable(MissingCudaDevice());
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition) << missing;
  EXPECT_NE(missing.message().find("cuda:"), std::string::npos) << missing;
  EXPECT_TRUE(MakeCurrentDevice(c10::Device(c10::kCPU)).ok());
}

TEST(DeviceTest, TrainerOnAnExplicitCpuDeviceMatchesTheDefaultBitForBit) {
  TrainerOptions explicit_cpu = Options(5);
  explicit_cpu.device = c10::Device(c10::kCPU);
  auto a = Trainer::Create(*PresetConfig("tiny"), Showers(), Options(5));
  auto b = Trainer::Create(*PresetConfig("tiny"), Showers(), explicit_cpu);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE((*a)->Step().ok());
    ASSERT_TRUE((*b)->Step().ok());
  }
  EXPECT_TRUE(BitIdentical((*a)->state(), (*b)->state()));
  for (const at::Tensor& w : testing::Weights((*b)->state())) EXPECT_TRUE(w.is_cpu());
}

// bf16 autocast is a GPU training mode: a CPU rank refuses it at creation, naming what to change.
TEST(DeviceTest, TrainerRefusesBf16AutocastOnTheCpu) {
  TrainerOptions options = Options(5);
  options.bf16_autocast = true;
  auto trainer = Trainer::Create(*PresetConfig("tiny"), Showers(), options);
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kFailedPrecondition) << trainer.status();
  EXPECT_NE(trainer.status().message().find("GPU"), std::string::npos) << trainer.status();
  EXPECT_NE(trainer.status().message().find("cpu"), std::string::npos) << trainer.status();
}

// The guard switches CUDA autocast to bfloat16 for its scope, nests, and restores what was there;
// off, it touches nothing. (LibTorch 1.13's CUDA switches; the GPU check runs it on a GPU.)
TEST(DeviceTest, Bf16AutocastGuardNestsAndRestores) {
  ASSERT_FALSE(at::autocast::is_enabled());
  const at::ScalarType before = at::autocast::get_autocast_gpu_dtype();
  {
    Bf16AutocastGuard off(false);
    EXPECT_FALSE(at::autocast::is_enabled());
  }
  {
    Bf16AutocastGuard outer(true);
    EXPECT_TRUE(at::autocast::is_enabled());
    EXPECT_EQ(at::autocast::get_autocast_gpu_dtype(), at::kBFloat16);
    {
      Bf16AutocastGuard inner(true);
      EXPECT_TRUE(at::autocast::is_enabled());
    }
    EXPECT_TRUE(at::autocast::is_enabled());
  }
  EXPECT_FALSE(at::autocast::is_enabled());
  EXPECT_EQ(at::autocast::get_autocast_gpu_dtype(), before);
}

TEST(DeviceTest, TrainerRefusesAMissingDeviceBeforeAnyWork) {
  TrainerOptions options = Options(5);
  options.device = MissingCudaDevice();
  auto trainer = Trainer::Create(*PresetConfig("tiny"), Showers(), options);
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kFailedPrecondition) << trainer.status();
}

TEST(DeviceTest, MovingAStateInPlaceKeepsItsOptimizersAndTrajectory) {
  auto moved = Trainer::Create(*PresetConfig("tiny"), Showers(), Options(9));
  auto still = Trainer::Create(*PresetConfig("tiny"), Showers(), Options(9));
  ASSERT_TRUE(moved.ok() && still.ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE((*moved)->Step().ok());
    ASSERT_TRUE((*still)->Step().ok());
  }
  TrainingState& s = (*moved)->mutable_state();
  const size_t g_state = s.generator_optimizer->state().size();
  const size_t d_state = s.discriminator_optimizer->state().size();
  ASSERT_GT(g_state, 0u);
  MoveTrainingState(s, c10::Device(c10::kCPU));
  EXPECT_EQ(s.generator_optimizer->state().size(), g_state);
  EXPECT_EQ(s.discriminator_optimizer->state().size(), d_state);
  // The optimisers still update the networks' own parameters.
  ASSERT_TRUE((*moved)->Step().ok());
  ASSERT_TRUE((*still)->Step().ok());
  EXPECT_TRUE(BitIdentical((*moved)->state(), (*still)->state()));
}

TEST(DeviceTest, CheckpointsLoadOntoTheCpuAndGenerationFollowsTheModel) {
  const std::string path = TempPath("device");
  auto trainer = Trainer::Create(*PresetConfig("tiny"), Showers(), Options(3));
  ASSERT_TRUE(trainer.ok());
  ASSERT_TRUE((*trainer)->Step().ok());
  ASSERT_TRUE((*trainer)->SaveCheckpoint(path).ok());
  absl::StatusOr<TrainingState> state = ReadCheckpoint(path);
  ASSERT_TRUE(state.ok()) << state.status();
  for (const at::Tensor& w : testing::Weights(*state)) EXPECT_TRUE(w.is_cpu());

  absl::StatusOr<std::unique_ptr<ShowerGenerator>> on_cpu = ShowerGenerator::Load(path);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  EXPECT_TRUE((*on_cpu)->device().is_cpu());
  GenerationRequest request;
  request.energy_gev = {50.0f, 120.0f, 300.0f};
  request.seed = 4;
  absl::StatusOr<showers::ShowerSet> generated = (*on_cpu)->Generate(request);
  ASSERT_TRUE(generated.ok()) << generated.status();
  EXPECT_EQ(generated->events(), 3);

  absl::StatusOr<std::unique_ptr<ShowerGenerator>> missing =
      ShowerGenerator::Load(path, MissingCudaDevice());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition) << missing.status();
  std::remove(path.c_str());
}

// GenerateOnDevice is GenerateFromNoise without the copy back: the same showers bit for bit (a lone
// shower too, run as a pair), and shapes or dtypes it cannot use are refused.
TEST(DeviceTest, GenerationOnTheDeviceIsGenerationFromNoiseWithoutTheCopy) {
  const std::string path = TempPath("on-device");
  ASSERT_TRUE(WriteCheckpoint(path, *NewTrainingState(*PresetConfig("tiny"), 2)).ok());
  absl::StatusOr<std::unique_ptr<ShowerGenerator>> generator = ShowerGenerator::Load(path);
  ASSERT_TRUE(generator.ok()) << generator.status();
  ShowerGenerator& g = **generator;
  for (int64_t n : {1, 3}) {
    const at::Tensor energy = at::linspace(20.0, 400.0, n, at::kFloat);
    const at::Tensor noise = at::randn({n, g.noise_dim()});
    std::vector<float> out(static_cast<size_t>(n * g.cells_per_shower()));
    ASSERT_TRUE(g.GenerateFromNoise(absl::MakeConstSpan(energy.data_ptr<float>(), n), {},
                                    absl::MakeConstSpan(noise.data_ptr<float>(), noise.numel()),
                                    out.data())
                    .ok());
    absl::StatusOr<at::Tensor> on_device =
        g.GenerateOnDevice(energy, at::Tensor(), noise, GenerationPrecision::kFloat32);
    ASSERT_TRUE(on_device.ok()) << on_device.status();
    EXPECT_EQ(on_device->sizes(),
              (std::vector<int64_t>{n, g.config().grid[0], g.config().grid[1], g.config().grid[2]}));
    EXPECT_TRUE(at::equal(on_device->reshape({n, -1}),
                          at::from_blob(out.data(), {n, g.cells_per_shower()}, at::kFloat)));
  }
  const at::Tensor noise = at::randn({2, g.noise_dim()});
  const at::Tensor energy = at::full({2}, 50.0f);
  for (const auto& [e, z, what] : std::vector<std::tuple<at::Tensor, at::Tensor, std::string>>{
           {energy, at::randn({3, g.noise_dim()}), "noise of another count"},
           {energy, at::randn({2, g.noise_dim() + 1}), "noise of another width"},
           {energy, noise.to(at::kDouble), "float64 noise"},
           {energy.view({2, 1}), noise, "energies as a matrix"},
           {at::Tensor(), noise, "no energies"}}) {
    absl::StatusOr<at::Tensor> refused =
        g.GenerateOnDevice(e, at::Tensor(), z, GenerationPrecision::kFloat32);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << what;
  }
  std::remove(path.c_str());
}

// bfloat16 is asked of the device a generator runs on: a CPU generator asks the CPU, whatever GPU
// the machine has; a GPU is answered by the CUDA build alone.
TEST(DeviceTest, Bf16SupportIsAnsweredForTheGeneratorsDevice) {
  const std::string path = TempPath("bf16");
  ASSERT_TRUE(WriteCheckpoint(path, *NewTrainingState(*PresetConfig("tiny"), 2)).ok());
  absl::StatusOr<std::unique_ptr<ShowerGenerator>> on_cpu = ShowerGenerator::Load(path);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  EXPECT_EQ((*on_cpu)->bf16_support(), Bf16Support(Bf16Device::kCpu));
  EXPECT_EQ(Bf16Support(), Bf16Support(Bf16Device::kCpu));
  const absl::Status gpu = Bf16Support(Bf16Device::kGpu);
  if (!torch::cuda::is_available()) {
    EXPECT_EQ(gpu.code(), absl::StatusCode::kFailedPrecondition) << gpu;
    EXPECT_NE(gpu.message().find("PRECISION_FP32"), std::string::npos) << gpu;
    std::printf("no CUDA device here: the GPU answer is the refusal (%s)\n",
                std::string(gpu.message()).c_str());
  }
  // The refusal a CPU generator gives for bfloat16 is the CPU's, not the GPU's.
  const absl::Status cpu = Bf16Support(Bf16Device::kCpu);
  GenerationRequest request;
  request.energy_gev = {50.0f};
  request.precision = GenerationPrecision::kBFloat16;
  absl::StatusOr<showers::ShowerSet> generated = (*on_cpu)->Generate(request);
  EXPECT_EQ(generated.status(), cpu);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gantry::gan
