// gpu_check: the device checks of workers/gan on one device against the CPU, run by
// tests/gpu/run.sh on a machine with an NVIDIA GPU (and, with --device=cpu, on any machine, to
// check the program).
//   1. correctness: a training step on the device against the same step on the CPU (float64 and
//      float32), a generation batch (float32, bfloat16 where the device has it), a checkpoint
//      written on the device read on the CPU bit for bit and resumed on the device;
//   2. a short 3dgan-25 training run on toy Monte Carlo on the device (samples/s, data stall);
//   3. the process group of the device's kind with one rank (NCCL for cuda), a GPU and a CPU
//   tensor;
//   4. generation showers/s for 3dgan-25 and 3dgan-51 at batches 128..4096, FP32 and BF16, and
//      training samples/s at the reference batch, with the peak device memory.
// Prints one "RESULT <json>" line per figure and "CHECK <name> ok|FAILED <detail>" per check; exits
// 1 when a check failed.
#include <ATen/ATen.h>
#include <torch/cuda.h>

#ifdef GANTRY_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "showers/toy_mc.h"
#include "workers/distributed/communicator.h"
#include "workers/gan/bf16_support.h"
#include "workers/gan/checkpoint.h"
#include "workers/gan/conv_stage.h"
#include "workers/gan/device.h"
#include "workers/gan/generator.h"
#include "workers/gan/heap_retention.h"
#include "workers/gan/in_memory_batch_source.h"
#include "workers/gan/openmp_wait_policy.h"
#include "workers/gan/preprocessing.h"
#include "workers/gan/shower_generator.h"
#include "workers/gan/trainer.h"

namespace gantry::gan {
namespace {

int g_failed = 0;
// The preset of the checks and the training run: 3dgan-25; tiny (and small batches) for the CPU
// self-check, which exercises this program rather than the device.
std::string g_run_preset = "3dgan-25";
int64_t g_run_batch = 0;  // 0: the preset's reference batch
// The batch of the one-step comparisons: 2 in the CPU self-check, whose float64 step (no oneDNN
// kernels for double) would otherwise take half of its time.
int64_t g_step_batch = 8;

void Check(const std::string& name, bool ok, const std::string& detail) {
  std::cout << "CHECK " << name << " " << (ok ? "ok" : "FAILED") << " " << detail << std::endl;
  if (!ok) ++g_failed;
}

void Result(const std::string& json) { std::cout << "RESULT " << json << std::endl; }

double MaxAbs(const std::vector<float>& values) {
  double m = 1e-30;
  for (float v : values) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

void Synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

void ResetPeakMemory(const c10::Device& device) {
#ifdef GANTRY_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
}

int64_t PeakMemoryBytes(const c10::Device& device) {
#ifdef GANTRY_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[0].peak;  // StatType::AGGREGATE
  }
#endif
  return -1;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

showers::ShowerSet ToyShowers(int64_t events, showers::Layout layout, uint64_t seed) {
  showers::ToyMcConfig config;
  config.layout = layout;
  config.events = events;
  config.seed = seed;
  config.threads = 8;
  absl::StatusOr<showers::ShowerSet> set = showers::SimulateToyMc(config);
  if (!set.ok()) {
    std::cerr << "toy MC: " << set.status() << std::endl;
    std::exit(2);
  }
  return *std::move(set);
}

// Two identical training states (one checkpoint read twice), in `dtype`.
std::pair<TrainingState, TrainingState> TwinStates(const ModelConfig& config, uint64_t seed,
                                                   at::ScalarType dtype, const std::string& path) {
  TrainingState fresh = *NewTrainingState(config, seed);
  if (!WriteCheckpoint(path, fresh).ok()) std::exit(2);
  TrainingState a = *ReadCheckpoint(path), b = *ReadCheckpoint(path);
  for (TrainingState* s : {&a, &b}) {
    s->generator->to(dtype);
    s->discriminator->to(dtype);
  }
  return {std::move(a), std::move(b)};
}

TrainingTensors InDtype(TrainingTensors t, at::ScalarType dtype) {
  t.images = t.images.to(dtype);
  t.energy100 = t.energy100.to(dtype);
  t.ecal = t.ecal.to(dtype);
  if (t.theta.defined()) t.theta = t.theta.to(dtype);
  return t;
}

// Largest |a - b| over all weights, relative to the largest |a|.
double MaxRelativeDifference(const TrainingState& a, const TrainingState& b) {
  double diff = 0, scale = 1e-30;
  auto visit = [&](const std::vector<at::Tensor>& wa, const std::vector<at::Tensor>& wb) {
    for (size_t i = 0; i < wa.size(); ++i) {
      const at::Tensor x = wa[i].to(at::kCPU, at::kDouble), y = wb[i].to(at::kCPU, at::kDouble);
      diff = std::max(diff, (x - y).abs().max().item<double>());
      scale = std::max(scale, x.abs().max().item<double>());
    }
  };
  visit(a.generator->parameters(), b.generator->parameters());
  visit(a.discriminator->parameters(), b.discriminator->parameters());
  return diff / scale;
}

// One training step on the CPU and on `device` from the same state and data.
void CheckTrainingStep(const std::string& preset, at::ScalarType dtype, double tolerance,
                       const c10::Device& device) {
  ModelConfig config = *PresetConfig(preset);
  config.dropout = 0;  // masks come from different generators on different devices
  const showers::ShowerSet data = ToyShowers(16, showers::Layout::kFixedAngle3DGan, 5);
  const TrainingTensors tensors = InDtype(*PreprocessShowers(config, data), dtype);
  auto [cpu_state, dev_state] = TwinStates(config, 3, dtype, "/tmp/gantry-gpu-check-twin.ckpt");
  TrainerOptions options;
  options.batch_size = g_step_batch;
  options.seed = 3;
  TrainerOptions on_device = options;
  on_device.device = device;
  auto cpu = Trainer::CreateFromTensors(std::move(cpu_state), tensors, options);
  auto dev = Trainer::CreateFromTensors(std::move(dev_state), tensors, on_device);
  if (!cpu.ok() || !dev.ok()) {
    Check("training_step." + preset, false, (cpu.ok() ? dev : cpu).status().ToString());
    return;
  }
  const bool stepped = (*cpu)->Step().ok() && (*dev)->Step().ok();
  const double diff = MaxRelativeDifference((*cpu)->state(), (*dev)->state());
  const std::string type = dtype == at::kDouble ? "float64" : "float32";
  Result(absl::StrFormat(
      R"({"check":"training_step","preset":"%s","dtype":"%s","device":"%s","max_rel_diff":%.3g})",
      preset, type, DeviceName(device), diff));
  Check(absl::StrCat("training_step.", preset, ".", type), stepped && diff <= tolerance,
        absl::StrFormat("max relative weight difference after one step %.3g (tolerance %.0e)", diff,
                        tolerance));
}

// Where bfloat16 on this machine's CPU departs from float32 (printed, not asserted): one conv3d and
// one linear layer alone, then the whole 3dgan-25 generator with and without the polyphase convs.
void DiagnoseCpuBf16() {
  c10::InferenceMode guard;
  auto relative = [](const at::Tensor& a, const at::Tensor& b) {
    return ((a - b.to(at::kFloat)).abs().max() / a.abs().max()).item<double>();
  };
  const at::Tensor x = at::randn({4, 8, 7, 7, 8}), w = at::randn({64, 8, 6, 6, 8}),
                   bias = at::randn({64});
  const at::Tensor conv = at::conv3d(x, w, bias, {1, 1, 1}, {2, 2, 3});
  const at::Tensor conv16 = at::conv3d(x.to(at::kBFloat16), w.to(at::kBFloat16),
                                       bias.to(at::kBFloat16), {1, 1, 1}, {2, 2, 3});
  const at::Tensor m = at::randn({16, 200}), lw = at::randn({3136, 200}), lb = at::randn({3136});
  const at::Tensor lin = at::linear(m, lw, lb);
  const at::Tensor lin16 =
      at::linear(m.to(at::kBFloat16), lw.to(at::kBFloat16), lb.to(at::kBFloat16));
  std::cout << absl::StrFormat("NOTE cpu bf16: conv3d %.3g, linear %.3g (max difference / max)\n",
                               relative(conv, conv16), relative(lin, lin16));
  const ModelConfig config = *PresetConfig("3dgan-25");
  TrainingState state = *NewTrainingState(config, 9);
  state.generator->eval();
  const int64_t n = 8;
  const at::Tensor input = state.generator->MakeInput(at::linspace(0.1, 5.0, n).reshape({n, 1}), {},
                                                      at::randn({n, state.generator->noise_dim()}));
  for (bool polyphase : {true, false}) {
    for (auto& module : state.generator->modules(/*include_self=*/false)) {
      if (auto* stage = module->as<ConvStageImpl>()) stage->set_polyphase(polyphase);
    }
    const at::Tensor a = state.generator->forward(input);
    const at::Tensor b = state.generator->forward(input.to(at::kBFloat16));
    std::cout << absl::StrFormat("NOTE cpu bf16: generator (polyphase %s) %.3g, max %.4g vs %.4g\n",
                                 polyphase ? "on" : "off", relative(a, b),
                                 a.abs().max().item<double>(), b.abs().max().item<double>());
  }
}

// `label` names a variant of the device's generation (its checks become "generation.<label>.*");
// `device_kernel` is how the device's generator runs its one-channel last stage (the CPU reference
// always runs the default).
void CheckGeneration(const c10::Device& device, const std::string& label = "",
                     FewChannelInference device_kernel = FewChannelInference::kAuto) {
  const ModelConfig config = *PresetConfig(g_run_preset);
  const std::string path = "/tmp/gantry-gpu-check-gen.ckpt";
  if (!WriteCheckpoint(path, *NewTrainingState(config, 9)).ok()) std::exit(2);
  auto cpu = ShowerGenerator::Load(path);
  auto dev = ShowerGenerator::Load(path, device);
  if (!cpu.ok() || !dev.ok()) {
    Check("generation", false, (cpu.ok() ? dev : cpu).status().ToString());
    return;
  }
  const int64_t n = 64, cells = (*cpu)->cells_per_shower();
  std::vector<float> energy(n), noise(n * (*cpu)->noise_dim());
  at::Tensor z = at::randn({static_cast<int64_t>(noise.size())}, at::kFloat);
  std::copy(z.data_ptr<float>(), z.data_ptr<float>() + noise.size(), noise.begin());
  for (int64_t i = 0; i < n; ++i) energy[i] = 10.0f + 7.5f * static_cast<float>(i);
  // The reference: float32 on the CPU. Each device output, and the CPU's own bfloat16, against it.
  std::vector<float> reference(n * cells), out(n * cells);
  if (absl::Status s = (*cpu)->GenerateFromNoise(energy, {}, noise, reference.data(),
                                                 GenerationPrecision::kFloat32);
      !s.ok()) {
    Check("generation", false, s.ToString());
    return;
  }
  const double scale = MaxAbs(reference);
  SetFewChannelInference(device_kernel);
  struct Case {
    ShowerGenerator* generator;
    GenerationPrecision precision;
    std::string name;
    double tolerance;
  };
  std::vector<Case> cases = {
      {dev->get(), GenerationPrecision::kFloat32, "fp32", 2e-3},
      {dev->get(), GenerationPrecision::kBFloat16, "bf16", 5e-2},
  };
  if (!device.is_cpu() && label.empty()) {
    cases.push_back({cpu->get(), GenerationPrecision::kBFloat16, "bf16_on_cpu", 5e-2});
  }
  const std::string prefix = label.empty() ? "generation." : "generation." + label + ".";
  for (const Case& c : cases) {
    const bool bf16 = c.precision == GenerationPrecision::kBFloat16;
    if (bf16 && !c.generator->bf16_support().ok()) {
      std::cout << "NOTE " << c.name << " generation not checked: " << c.generator->bf16_support()
                << std::endl;
      continue;
    }
    const absl::Status s =
        c.generator->GenerateFromNoise(energy, {}, noise, out.data(), c.precision);
    double diff = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::abs(out[i] - reference[i])));
    }
    Result(absl::StrFormat(
        R"({"check":"generation","preset":"%s","case":"%s","device":"%s","max_rel_diff":%.3g,"max_cell":%.4g,"reference_max_cell":%.4g})",
        g_run_preset, prefix + c.name, DeviceName(device), diff / scale, MaxAbs(out), scale));
    if (c.name == "bf16_on_cpu" && !(s.ok() && diff / scale <= c.tolerance)) DiagnoseCpuBf16();
    Check(prefix + c.name, s.ok() && diff / scale <= c.tolerance,
          s.ok() ? absl::StrFormat("max cell difference from float32 on the CPU / its max cell "
                                   "%.3g (tolerance %.0e)",
                                   diff / scale, c.tolerance)
                 : s.ToString());
  }
  SetFewChannelInference(FewChannelInference::kAuto);
}

void CheckCheckpointAcrossDevices(const c10::Device& device) {
  const ModelConfig config = *PresetConfig("tiny");
  const showers::ShowerSet data = ToyShowers(16, showers::Layout::kFixedAngle3DGan, 6);
  TrainerOptions options;
  options.batch_size = 4;
  options.seed = 4;
  options.device = device;
  auto trainer = Trainer::Create(config, data, options);
  if (!trainer.ok()) {
    Check("checkpoint", false, trainer.status().ToString());
    return;
  }
  bool ok = (*trainer)->Step().ok() && (*trainer)->Step().ok();
  const std::string path = "/tmp/gantry-gpu-check-resume.ckpt";
  ok = ok && (*trainer)->SaveCheckpoint(path).ok();
  absl::StatusOr<TrainingState> read = ReadCheckpoint(path);
  ok = ok && read.ok();
  const double diff = ok ? MaxRelativeDifference((*trainer)->state(), *read) : 1;
  bool on_cpu = ok;
  if (ok) {
    for (const at::Tensor& p : read->generator->parameters()) on_cpu = on_cpu && p.is_cpu();
  }
  Check("checkpoint.device_to_cpu", ok && on_cpu && diff == 0,
        absl::StrFormat("read onto the CPU: %s, weight difference %.3g (must be 0)",
                        on_cpu ? "yes" : "no", diff));
  // Back onto the device from the file (written on the device, read on the CPU, moved).
  auto resumed = Trainer::Resume(path, data, options);
  const bool continued = resumed.ok() && (*resumed)->Step().ok() && (*resumed)->state().step == 3;
  Check("checkpoint.resume_on_device", continued,
        resumed.ok() ? "resumed and stepped" : resumed.status().ToString());
}

void CheckProcessGroup(const c10::Device& device) {
  distributed::CommunicatorOptions options;
  options.rendezvous_host = "127.0.0.1";
  options.rendezvous_port = 0;  // one rank: an ephemeral port
  options.world_size = 1;
  options.gpu = device.is_cuda();
  auto comm = distributed::Communicator::Connect(options);
  if (!comm.ok()) {
    Check("process_group", false, comm.status().ToString());
    return;
  }
  std::vector<at::Tensor> tensors{at::ones({1000}, at::TensorOptions(at::kFloat).device(device)),
                                  at::full({3}, 7, at::kLong)};
  const absl::Status reduced = (*comm)->AllReduceSum(tensors);
  std::vector<at::Tensor> broadcast{at::arange(5, at::TensorOptions(at::kLong).device(device))};
  const absl::Status sent = (*comm)->Broadcast(broadcast, 0);
  const bool ok = reduced.ok() && sent.ok() && tensors[0].sum().item<double>() == 1000 &&
                  tensors[1].sum().item<int64_t>() == 21 &&
                  broadcast[0].sum().item<int64_t>() == 10 && tensors[0].device() == device;
  Check(absl::StrCat("process_group.", device.is_cuda() ? "nccl" : "gloo"), ok,
        reduced.ok()
            ? (sent.ok() ? "one rank: all-reduce and broadcast of a device and a CPU tensor"
                         : sent.ToString())
            : reduced.ToString());
}

void TrainingRun(const c10::Device& device, int steps, const std::string& mode) {
  const ModelConfig config = *PresetConfig(g_run_preset);
  const int64_t batch = g_run_batch > 0 ? g_run_batch : config.default_batch;
  const showers::ShowerSet data = ToyShowers(4 * batch, showers::Layout::kFixedAngle3DGan, 8);
  TrainerOptions options;
  options.batch_size = batch;
  options.seed = 1;
  options.device = device;
  options.bf16_autocast = mode == "bf16_autocast";
  auto trainer = Trainer::Create(config, data, options);
  if (options.bf16_autocast && device.is_cpu()) {  // a GPU mode: the CPU refuses it
    Check("training_run.bf16_autocast_refused_on_cpu",
          trainer.status().code() == absl::StatusCode::kFailedPrecondition,
          trainer.status().ToString());
    return;
  }
  if (!trainer.ok()) {
    Check("training_run", false, trainer.status().ToString());
    return;
  }
  // Warm-up (cuDNN's algorithm choice); one step for the CPU self-check.
  for (int i = 0; i < (g_run_batch > 0 ? 1 : 2); ++i) (void)(*trainer)->Step();
  Synchronize(device);
  ResetPeakMemory(device);
  double seconds = 0, wait = 0;
  absl::Status failed;
  const auto start = std::chrono::steady_clock::now();
  StepReport last;
  for (int i = 0; i < steps && failed.ok(); ++i) {
    absl::StatusOr<StepReport> step = (*trainer)->Step();
    if (step.ok()) wait += step->data_wait_seconds;
    if (!step.ok()) failed = step.status();
    if (step.ok()) last = *step;
  }
  // Every loss of the last step finite (the same seed and data in each mode: comparable).
  for (const std::vector<double>* losses :
       {&last.discriminator_real_loss, &last.discriminator_fake_loss, &last.generator_loss}) {
    for (double v : *losses) {
      if (failed.ok() && !std::isfinite(v)) failed = absl::InternalError("a loss is not finite");
    }
  }
  const bool ok = failed.ok();
  if (ok && !last.generator_loss.empty()) {
    Result(absl::StrFormat(
        R"({"bench":"training_losses","preset":"%s","mode":"%s","steps":%d,"d_real":%.4f,"d_fake":%.4f,"g":%.4f})",
        g_run_preset, mode, steps + (g_run_batch > 0 ? 1 : 2), last.discriminator_real_loss[0],
        last.discriminator_fake_loss[0], last.generator_loss[0]));
  }
  Synchronize(device);
  seconds = Seconds(start);
  const double rate = steps * (*trainer)->batch_size() / seconds;
  Result(absl::StrFormat(
      R"({"bench":"training","preset":"%s","mode":"%s","batch":%d,"device":"%s","samples_per_s":%.1f,"data_stall":%.4f,"peak_bytes":%d})",
      g_run_preset, mode, (*trainer)->batch_size(), DeviceName(device), rate, wait / seconds,
      PeakMemoryBytes(device)));
  Check(absl::StrCat("training_run.", g_run_preset, ".", mode), ok,
        ok ? absl::StrFormat("%d steps, %.1f samples/s", steps, rate) : failed.ToString());
}

// Two identical runs of a few steps on the device: equal bit for bit? (Run once without and
// once after UseDeterministicAlgorithms; TrainingRun before and after gives the mode's cost.)
void CheckRepeatability(const c10::Device& device, bool deterministic) {
  const ModelConfig config = *PresetConfig(g_run_preset);
  const showers::ShowerSet data = ToyShowers(64, showers::Layout::kFixedAngle3DGan, 10);
  TrainerOptions options;
  options.batch_size = g_run_batch > 0 ? g_run_batch : 16;
  options.seed = 6;
  options.device = device;
  auto a = Trainer::Create(config, data, options);
  auto b = Trainer::Create(config, data, options);
  absl::Status failed = a.ok() ? b.status() : a.status();
  const int steps = g_run_batch > 0 ? 2 : 3;
  for (int i = 0; failed.ok() && i < steps; ++i) {
    failed = (*a)->Step().status();
    if (failed.ok()) failed = (*b)->Step().status();
  }
  const bool ok = failed.ok();
  const double diff = ok ? MaxRelativeDifference((*a)->state(), (*b)->state()) : -1;
  const std::string mode = deterministic ? "deterministic" : "default";
  Result(
      absl::StrFormat(R"({"check":"repeatability","mode":"%s","device":"%s","max_rel_diff":%.3g})",
                      mode, DeviceName(device), diff));
  // The default mode may differ run to run on a GPU (atomics in cuDNN's backward): reported, not
  // asserted; the deterministic mode must repeat exactly.
  if (deterministic || device.is_cpu()) {
    Check("repeatability." + mode, ok && diff == 0,
          ok ? absl::StrFormat("two runs of %d steps differ by %.3g (must be 0)", steps, diff)
             : failed.ToString());
  }
}

// The inference variants measured: the layout, and how the last stage's one-channel conv runs.
struct InferenceVariant {
  bool channels_last;
  FewChannelInference last_stage;
  const char* name;
};
const InferenceVariant kInferenceVariants[] = {
    {false, FewChannelInference::kDirect, "ncdhw"},
    {true, FewChannelInference::kDirect, "channels_last"},
    {true, FewChannelInference::kTapSum, "channels_last+tap_sum"},
};

// Serving's settings: no deterministic mode; cuDNN's algorithm search (autotune) off, as the
// worker runs (on moved no on-device figure by more than 0.4% on an H200). Each figure twice: "served" is GenerateFromNoise as the worker calls
// it (inputs from the host, showers copied back into host memory); "on_device" is GenerateOnDevice
// with the inputs already on the device and the showers left there, as the PyTorch benchmark
// measures its network. Both layouts: the default (NCDHW) and channels-last.
void GenerationThroughput(const c10::Device& device, const std::string& preset,
                          const std::vector<int64_t>& batches) {
  const bool autotune = false;
  at::globalContext().setBenchmarkCuDNN(autotune);
  const ModelConfig config = *PresetConfig(preset);
  const std::string path = "/tmp/gantry-gpu-check-bench.ckpt";
  if (!WriteCheckpoint(path, *NewTrainingState(config, 2)).ok()) std::exit(2);
  auto generator = ShowerGenerator::Load(path, device);
  if (!generator.ok()) {
    Check("generation_throughput." + preset, false, generator.status().ToString());
    return;
  }
  ShowerGenerator& g = **generator;
  for (const InferenceVariant& variant : kInferenceVariants) {
    g.set_channels_last(variant.channels_last);
    SetFewChannelInference(variant.last_stage);
    for (GenerationPrecision precision :
         {GenerationPrecision::kFloat32, GenerationPrecision::kBFloat16}) {
      const bool bf16 = precision == GenerationPrecision::kBFloat16;
      if (bf16 && !g.bf16_support().ok()) continue;
      for (int64_t batch : batches) {
        const int64_t cells = g.cells_per_shower();
        std::vector<float> energy(batch, 100.0f), theta, noise(batch * g.noise_dim(), 0.5f);
        if (config.variable_angle()) theta.assign(batch, 1.5f);
        std::vector<float> out(batch * cells);
        const at::Tensor energy_d = at::full({batch}, 100.0f, at::device(device));
        const at::Tensor theta_d =
            config.variable_angle() ? at::full({batch}, 1.5f, at::device(device)) : at::Tensor();
        const at::Tensor noise_d = at::full({batch, g.noise_dim()}, 0.5f, at::device(device));
        for (const std::string mode : {"served", "on_device"}) {
          const bool served = mode == "served";
          auto once = [&]() {
            return served ? g.GenerateFromNoise(energy, theta, noise, out.data(), precision)
                          : g.GenerateOnDevice(energy_d, theta_d, noise_d, precision).status();
          };
          if (absl::Status s = once(); !s.ok()) {
            Check(absl::StrCat("generation_throughput.", preset, ".", mode), false, s.ToString());
            return;
          }
          Synchronize(device);
          ResetPeakMemory(device);
          int iterations = 0;
          const auto start = std::chrono::steady_clock::now();
          while (Seconds(start) < 0.5 || iterations < 3) {
            if (!once().ok()) break;
            ++iterations;
          }
          Synchronize(device);
          const double rate = iterations * batch / Seconds(start);
          Result(absl::StrFormat(
              R"({"bench":"generation","impl":"gantry","preset":"%s","precision":"%s","layout":"%s","mode":"%s","cudnn_autotune":%s,"batch":%d,"device":"%s","showers_per_s":%.1f,"peak_bytes":%d})",
              preset, bf16 ? "bf16" : "fp32", variant.name, mode,
              autotune ? "true" : "false", batch, DeviceName(device), rate,
              PeakMemoryBytes(device)));
        }
      }
    }
  }
  g.set_channels_last(false);
  SetFewChannelInference(FewChannelInference::kAuto);
}

// Where a generation pass spends its time: the dense layer and each conv stage timed alone (the
// device synchronised around each), in both layouts and precisions, autotune off.
void StageTimes(const c10::Device& device, const std::string& preset, int64_t batch) {
  at::globalContext().setBenchmarkCuDNN(false);
  const ModelConfig config = *PresetConfig(preset);
  TrainingState state = *NewTrainingState(config, 2);
  Generator g = state.generator;
  g->to(device);
  g->eval();
  c10::InferenceMode guard;
  const at::Tensor noise = at::full({batch, g->noise_dim()}, 0.5f, at::device(device));
  const at::Tensor energy100 = at::full({batch, 1}, 1.0f, at::device(device));
  const at::Tensor theta = at::full({batch, 1}, 1.5f, at::device(device));
  const at::Tensor input = g->MakeInput(energy100, theta, noise);
  for (const InferenceVariant& variant : kInferenceVariants) {
    g->set_channels_last(variant.channels_last);
    SetFewChannelInference(variant.last_stage);
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      if (dtype == at::kBFloat16 && !Bf16Support(Bf16Device::kGpu).ok() && device.is_cuda())
        continue;
      const std::array<int64_t, 4>& shape = g->dense_shape();
      const at::Tensor x0 = input.to(dtype);
      auto parameters = g->named_parameters();
      const at::Tensor dense_weight = parameters["dense.weight"].to(dtype);
      const at::Tensor dense_bias = parameters["dense.bias"].to(dtype);
      const int repeats = 10;
      std::vector<double> seconds(g->stages().size() + 1, 0.0);
      for (int r = 0; r <= repeats; ++r) {  // the first pass warms up
        at::Tensor x = x0;
        if (g->shower_template().defined()) {
          x = config.variable_angle() ? x : x.narrow(1, 0, config.latent);
        }
        Synchronize(device);
        auto start = std::chrono::steady_clock::now();
        x = at::linear(x, dense_weight, dense_bias)
                .view({-1, shape[0], shape[1], shape[2], shape[3]});
        Synchronize(device);
        if (r > 0) seconds[0] += Seconds(start);
        for (size_t i = 0; i < g->stages().size(); ++i) {
          start = std::chrono::steady_clock::now();
          ConvStage stage = g->stages()[i];  // a holder: shares the module
          x = stage->forward(x);
          Synchronize(device);
          if (r > 0) seconds[i + 1] += Seconds(start);
        }
      }
      for (size_t i = 0; i < seconds.size(); ++i) {
        Result(absl::StrFormat(
            R"({"bench":"stage_time","preset":"%s","precision":"%s","layout":"%s","batch":%d,"layer":"%s","ms":%.3f})",
            preset, dtype == at::kFloat ? "fp32" : "bf16",
            variant.name, batch,
            i == 0 ? "dense" : absl::StrCat("stage", i - 1), 1000.0 * seconds[i] / repeats));
      }
    }
  }
  g->set_channels_last(false);
  SetFewChannelInference(FewChannelInference::kAuto);
}

// The layer times and showers/s of every inference variant; then the verdict of all checks run.
int GenerationFigures(const c10::Device& device, bool quick) {
  StageTimes(device, quick ? "tiny" : "3dgan-25", quick ? 4 : 1024);
  if (quick) {
    GenerationThroughput(device, "tiny", {16});
  } else {
    GenerationThroughput(device, "3dgan-25", {128, 256, 512, 1024, 2048, 4096});
    GenerationThroughput(device, "3dgan-51", {128, 256, 512, 1024});
  }
  std::cout << (g_failed == 0 ? "ALL CHECKS PASSED" : absl::StrCat(g_failed, " CHECK(S) FAILED"))
            << std::endl;
  return g_failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gantry::gan

int main(int argc, char** argv) {
  using namespace gantry::gan;
  // The process settings of gantry-worker, whose training this program checks.
  PreferPassiveOpenMpWait(argv);  // may re-execute this program
  RetainFreedHeapMemory();
  std::string device_text = "cuda:0";
  bool quick = false;
  bool skip_generation = false;
  bool generation_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--device=", 0) == 0) device_text = arg.substr(9);
    if (arg == "--quick") quick = true;  // the CPU self-check: small figures only
    if (arg == "--skip-generation") skip_generation = true;  // checks and training only
    // Generation alone: its correctness checks, layer times and showers/s.
    if (arg == "--generation-only") generation_only = true;
    if (arg == "--diagnose-cpu-bf16") {  // that alone
      DiagnoseCpuBf16();
      return 0;
    }
  }
  absl::StatusOr<c10::Device> device = ParseDevice(device_text, "--device");
  absl::Status usable = device.ok() ? DeviceUsable(*device) : device.status();
  if (usable.ok()) usable = MakeCurrentDevice(*device);
  if (!usable.ok()) {
    std::cerr << usable << std::endl;
    return 2;
  }
  std::cout << "device " << DeviceName(*device) << ", cuda available "
            << torch::cuda::is_available()
            << ", bf16: " << Bf16Support(device->is_cpu() ? Bf16Device::kCpu : Bf16Device::kGpu)
            << std::endl;
  if (quick) {
    g_run_preset = "tiny";
    g_run_batch = 8;
    g_step_batch = 2;
  }
  if (generation_only) {
    std::cout << "NOTE training, checkpoint and process-group checks not run (--generation-only)"
              << std::endl;
    CheckGeneration(*device);
    CheckGeneration(*device, "tap_sum", FewChannelInference::kTapSum);
    return GenerationFigures(*device, quick);
  }
  CheckTrainingStep("tiny", at::kDouble, 1e-7, *device);
  if (!quick) CheckTrainingStep("3dgan-25", at::kDouble, 1e-7, *device);
  CheckTrainingStep(g_run_preset, at::kFloat, 2e-2, *device);
  CheckGeneration(*device);
  CheckGeneration(*device, "tap_sum", FewChannelInference::kTapSum);
  CheckCheckpointAcrossDevices(*device);
  CheckProcessGroup(*device);
  TrainingRun(*device, quick ? 2 : 20, "default");
  TrainingRun(*device, quick ? 2 : 20, "bf16_autocast");
  CheckRepeatability(*device, /*deterministic=*/false);
  UseDeterministicAlgorithms();
  CheckRepeatability(*device, /*deterministic=*/true);
  TrainingRun(*device, quick ? 2 : 20, "deterministic");  // the mode's cost
  // Generation as served: the deterministic mode off again.
  at::globalContext().setDeterministicAlgorithms(false, /*warn_only=*/false);
  at::globalContext().setDeterministicCuDNN(false);
  if (skip_generation) {
    std::cout << "NOTE generation not measured (--skip-generation)" << std::endl;
    std::cout << (g_failed == 0 ? "ALL CHECKS PASSED" : absl::StrCat(g_failed, " CHECK(S) FAILED"))
              << std::endl;
    return g_failed == 0 ? 0 : 1;
  }
  return GenerationFigures(*device, quick);
}
