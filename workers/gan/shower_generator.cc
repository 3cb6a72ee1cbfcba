#include "workers/gan/shower_generator.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "workers/baseline/baseline_sampler.h"
#include "workers/gan/bf16_support.h"
#include "workers/gan/checkpoint.h"
#include "workers/gan/device.h"
#include "workers/gan/preprocessing.h"

namespace gantry::gan {
namespace {

// The network's input in the arithmetic of the pass.
at::Tensor InPrecision(const at::Tensor& input, GenerationPrecision precision) {
  return precision == GenerationPrecision::kBFloat16 ? input.to(at::kBFloat16) : input;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShowerGenerator>> ShowerGenerator::Load(
    const std::string& checkpoint_path, const c10::Device& device) {
  RETURN_IF_ERROR(DeviceUsable(device));
  absl::StatusOr<TrainingState> state = ReadCheckpoint(checkpoint_path, /*load_optimizers=*/false);
  if (!state.ok()) return state.status();
  try {
    state->generator->to(device);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("moving the generator to ", DeviceName(device), ": ",
                                            e.what_without_backtrace()));
  }
  return std::make_unique<ShowerGenerator>(state->config, state->generator);
}

absl::Status ShowerGenerator::bf16_support() const {
  return Bf16Support(device_.is_cpu() ? Bf16Device::kCpu : Bf16Device::kGpu);
}

ShowerGenerator::ShowerGenerator(ModelConfig config, Generator generator)
    : config_(std::move(config)), generator_(std::move(generator)) {
  generator_->eval();
  const std::vector<at::Tensor> parameters = generator_->parameters();
  if (!parameters.empty()) device_ = parameters.front().device();
  // Channels-last on a GPU, the default layout on a CPU: measured (docs/BENCHMARKS.md "GPU").
  generator_->set_channels_last(device_.is_cuda());
}

absl::StatusOr<showers::ShowerSet> ShowerGenerator::Generate(const GenerationRequest& request) {
  const int64_t n = static_cast<int64_t>(request.energy_gev.size());
  if (n == 0) return absl::InvalidArgumentError("no energies to generate showers for");
  if (request.batch_size < 1) return absl::InvalidArgumentError("batch_size must be >= 1");
  for (float e : request.energy_gev) {
    if (!(e > 0) || !std::isfinite(e)) {
      return absl::InvalidArgumentError(absl::StrCat("energy must be > 0 GeV, got ", e));
    }
  }
  if (request.precision == GenerationPrecision::kBFloat16) {
    if (absl::Status s = bf16_support(); !s.ok()) return s;
  }
  const bool angles = config_.variable_angle();
  if (angles && static_cast<int64_t>(request.theta_rad.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("preset ", config_.preset, " needs one angle per energy (", n, " energies, ",
                     request.theta_rad.size(), " angles)"));
  }
  showers::ShowerSet out;
  out.layout = angles ? showers::Layout::kVariableAngle3DGan : showers::Layout::kFixedAngle3DGan;
  out.shape = config_.grid;
  out.energy_gev = request.energy_gev;
  if (angles) out.theta_rad = request.theta_rad;
  const int64_t cells = out.cells_per_event();
  out.cells.resize(static_cast<size_t>(n * cells));
  try {
    c10::InferenceMode guard;
    at::Generator rng = at::make_generator<at::CPUGeneratorImpl>(request.seed);
    const at::Tensor energy =
        at::from_blob(const_cast<float*>(request.energy_gev.data()), {n, 1}, at::kFloat)
            .to(device_) /
        config_.energy_scale;
    at::Tensor theta;
    if (angles) {
      theta = at::from_blob(const_cast<float*>(request.theta_rad.data()), {n, 1}, at::kFloat)
                  .to(device_);
    }
    for (int64_t first = 0; first < n; first += request.batch_size) {
      const int64_t count = std::min(request.batch_size, n - first);
      const at::Tensor noise =
          at::randn({count, generator_->noise_dim()}, rng, at::kFloat).to(device_);
      const at::Tensor input = generator_->MakeInput(
          energy.slice(0, first, first + count),
          angles ? theta.slice(0, first, first + count) : at::Tensor(), noise);
      const at::Tensor showers =
          UndoCellPreprocessing(config_, generator_->forward(InPrecision(input, request.precision)))
              .to(at::kCPU)
              .contiguous();
      std::memcpy(out.cells.data() + first * cells, showers.data_ptr<float>(),
                  sizeof(float) * static_cast<size_t>(count * cells));
      for (int64_t i = first; i < first + count; ++i) {
        DrawSpots(request.seed, static_cast<uint64_t>(i), out.mutable_event(i));
      }
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("generation failed: ", e.what_without_backtrace()));
  }
  return out;
}

int64_t ShowerGenerator::noise_dim() const { return generator_->noise_dim(); }

void ShowerGenerator::DrawSpots(uint64_t seed, uint64_t index, float* shower) const {
  if (!config_.generator_spots || !(config_.generator_spot_gev > 0)) return;
  baseline::DrawSpots(config_.generator_spot_gev, seed, index, shower, cells_per_shower(),
                      config_.generator_spot_shape);
}

int64_t ShowerGenerator::cells_per_shower() const {
  return config_.grid[0] * config_.grid[1] * config_.grid[2];
}

int64_t ShowerGenerator::memory_bytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& p : generator_->parameters()) bytes += p.numel() * p.element_size();
  for (const at::Tensor& b : generator_->buffers()) bytes += b.numel() * b.element_size();
  return bytes;
}

absl::Status ShowerGenerator::GenerateFromNoise(absl::Span<const float> energy_gev,
                                                absl::Span<const float> theta_rad,
                                                absl::Span<const float> noise, float* out,
                                                GenerationPrecision precision) {
  const int64_t n = static_cast<int64_t>(energy_gev.size());
  if (n == 0) return absl::InvalidArgumentError("no energies to generate showers for");
  const int64_t width = noise_dim();
  if (static_cast<int64_t>(noise.size()) != n * width) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise has ", noise.size(), " floats, want ", n, " x ", width));
  }
  for (float e : energy_gev) {
    if (!(e > 0) || !std::isfinite(e)) {
      return absl::InvalidArgumentError(absl::StrCat("energy must be > 0 GeV, got ", e));
    }
  }
  if (precision == GenerationPrecision::kBFloat16) {
    if (absl::Status s = bf16_support(); !s.ok()) return s;
  }
  const bool angles = config_.variable_angle();
  if (angles && static_cast<int64_t>(theta_rad.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("preset ", config_.preset,
                                                   " needs one angle per energy (", n,
                                                   " energies, ", theta_rad.size(), " angles)"));
  }
  try {
    c10::InferenceMode guard;
    const at::Tensor energy =
        at::from_blob(const_cast<float*>(energy_gev.data()), {n}, at::kFloat);
    const at::Tensor theta =
        angles ? at::from_blob(const_cast<float*>(theta_rad.data()), {n}, at::kFloat)
               : at::Tensor();
    const at::Tensor z = at::from_blob(const_cast<float*>(noise.data()), {n, width}, at::kFloat);
    absl::StatusOr<at::Tensor> showers = GenerateOnDevice(energy, theta, z, precision);
    if (!showers.ok()) return showers.status();
    // Straight into the caller's buffer (no host tensor in between).
    at::from_blob(out, {n, cells_per_shower()}, at::kFloat)
        .copy_(showers->reshape({n, cells_per_shower()}));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("generation failed: ", e.what_without_backtrace()));
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> ShowerGenerator::GenerateOnDevice(const at::Tensor& energy_gev,
                                                             const at::Tensor& theta_rad,
                                                             const at::Tensor& noise,
                                                             GenerationPrecision precision) {
  const bool angles = config_.variable_angle();
  auto vector_of = [](const at::Tensor& t, int64_t n) {
    return t.defined() && t.scalar_type() == at::kFloat && t.dim() == 1 && t.size(0) == n;
  };
  const int64_t n = energy_gev.defined() && energy_gev.dim() == 1 ? energy_gev.size(0) : 0;
  if (n == 0 || !vector_of(energy_gev, n)) {
    return absl::InvalidArgumentError("energies must be a non-empty float32 vector");
  }
  if (angles && !vector_of(theta_rad, n)) {
    return absl::InvalidArgumentError(absl::StrCat("preset ", config_.preset,
                                                   " needs a float32 vector of ", n, " angles"));
  }
  if (!noise.defined() || noise.scalar_type() != at::kFloat || noise.dim() != 2 ||
      noise.size(0) != n || noise.size(1) != noise_dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise must be float32 [", n, ", ", noise_dim(), "]"));
  }
  if (precision == GenerationPrecision::kBFloat16) {
    if (absl::Status s = bf16_support(); !s.ok()) return s;
  }
  try {
    c10::InferenceMode guard;
    at::Tensor energy = energy_gev.view({n, 1}).to(device_) / config_.energy_scale;
    at::Tensor theta = angles ? theta_rad.view({n, 1}).to(device_) : at::Tensor();
    at::Tensor z = noise.to(device_);
    if (n == 1) {
      // A batch of one takes other kernels (matrix-vector in the first layer) whose rounding
      // differs from every batch of 2..128, which agree bit for bit: a lone shower runs as a pair
      // (only the first is kept), so a shower does not depend on whether it was batched alone.
      energy = energy.repeat({2, 1});
      if (angles) theta = theta.repeat({2, 1});
      z = z.repeat({2, 1});
    }
    return UndoCellPreprocessing(
               config_, generator_->forward(
                            InPrecision(generator_->MakeInput(energy, theta, z), precision)))
        .narrow(0, 0, n);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("generation failed: ", e.what_without_backtrace()));
  }
}

}  // namespace gantry::gan
