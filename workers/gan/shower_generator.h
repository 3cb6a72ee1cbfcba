// ShowerGenerator: batched inference with a trained generator: energies (and angles) in, showers
// in GeV in the data set's layout out. Holds the generator in eval mode; not thread-safe (one
// caller at a time; the serving batcher serialises requests).
#ifndef GANTRY_WORKERS_GAN_SHOWER_GENERATOR_H_
#define GANTRY_WORKERS_GAN_SHOWER_GENERATOR_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "jobspec/model_config.h"
#include "showers/shower_set.h"
#include "workers/gan/generator.h"

namespace gantry::gan {

// The arithmetic of a forward pass; showers always come out as float32.
enum class GenerationPrecision { kFloat32, kBFloat16 };

struct GenerationRequest {
  std::vector<float> energy_gev;  // one shower per entry
  std::vector<float> theta_rad;   // same length for 3dgan-51; ignored (may be empty) otherwise
  uint64_t seed = 1;              // latent noise; same seed + request -> same showers
  int64_t batch_size = 128;
  GenerationPrecision precision = GenerationPrecision::kFloat32;
};

class ShowerGenerator {
 public:
  // Loads the generator of a checkpoint (optimiser state is skipped) onto `device`. Errors as
  // ReadCheckpoint; FAILED_PRECONDITION for a device this build or machine lacks (DeviceUsable).
  static absl::StatusOr<std::unique_ptr<ShowerGenerator>> Load(
      const std::string& checkpoint_path, const c10::Device& device = c10::Device(c10::kCPU));
  // Wraps an in-memory generator (shared with the caller; switched to eval mode). Generation runs
  // on the device its parameters are on; the latent noise is drawn on the CPU (the same showers
  // for the same seed on any device, up to the device's rounding) and showers come back to the CPU.
  ShowerGenerator(ModelConfig config, Generator generator);

  // INVALID_ARGUMENT for empty/non-positive energies, missing angles, batch < 1;
  // FAILED_PRECONDITION for bfloat16 where Bf16Support() says no. The latent noise does not depend
  // on the precision: the same request in both precisions runs the same inputs. With spot
  // sampling shower i's spots are DrawSpots(request.seed, i).
  absl::StatusOr<showers::ShowerSet> Generate(const GenerationRequest& request);

  // One forward pass (eval mode, no autograd) from caller-supplied latent noise: n = energy_gev's
  // size showers, `noise` holds n * noise_dim() floats row-major, `theta_rad` n angles for
  // 3dgan-51 (ignored otherwise). Writes n * cells-per-shower floats (GeV, row-major x, y, z) to
  // `out`. Used by the serving batcher, which derives each shower's noise from (seed, index) so
  // that results do not depend on how requests were batched (a lone shower is run as a pair, as
  // a batch of one rounds differently from larger batches). INVALID_ARGUMENT on bad sizes or
  // energies, FAILED_PRECONDITION for bfloat16 where Bf16Support() says no, INTERNAL when LibTorch
  // fails. In bfloat16 the input is rounded to bfloat16 after conditioning and the output widened
  // to float32 before the GeV conversion; batch independence is then not promised (oneDNN picks
  // its bfloat16 kernels by batch size). A generator with spot sampling gives its expected
  // showers here (and in GenerateOnDevice): the caller draws each one's spots (DrawSpots).
  absl::Status GenerateFromNoise(absl::Span<const float> energy_gev,
                                 absl::Span<const float> theta_rad, absl::Span<const float> noise,
                                 float* out,
                                 GenerationPrecision precision = GenerationPrecision::kFloat32);
  // GenerateFromNoise's forward pass without the copy back, for callers that keep showers on the
  // device (benchmarks; a next step on the GPU): float32 tensors on any device, `energy_gev` [n],
  // `theta_rad` [n] for 3dgan-51 (ignored otherwise), `noise` [n, noise_dim()]; returns the showers
  // [n, x, y, z] in GeV, float32, on device(). INVALID_ARGUMENT for other shapes or dtypes,
  // FAILED_PRECONDITION for bfloat16 where bf16_support() says no, INTERNAL when LibTorch fails.
  // The values are not looked at (that would wait for the device): energies must be > 0, as
  // GenerateFromNoise checks. n = 1 runs as n = 2, as there.
  absl::StatusOr<at::Tensor> GenerateOnDevice(const at::Tensor& energy_gev,
                                              const at::Tensor& theta_rad, const at::Tensor& noise,
                                              GenerationPrecision precision);
  // Inference in the channels-last 3D layout (GeneratorImpl::set_channels_last): on by default for
  // a generator on a GPU, off on a CPU (each the faster there).
  void set_channels_last(bool on) { generator_->set_channels_last(on); }
  // ModelConfig::generator_spots: replaces the expected cell energies (GeV) of one generated
  // shower by its spots, drawn from the stream of shower `index` of a request with `seed`
  // (baseline::DrawSpots); nothing without spots.
  void DrawSpots(uint64_t seed, uint64_t index, float* shower) const;
  bool draws_spots() const { return config_.generator_spots; }
  // Width of the latent noise per shower GenerateFromNoise expects.
  int64_t noise_dim() const;
  // Floats per generated shower (the product of the grid).
  int64_t cells_per_shower() const;
  // Bytes held by the generator's parameters and buffers.
  int64_t memory_bytes() const;

  const ModelConfig& config() const { return config_; }
  const c10::Device& device() const { return device_; }
  // Bf16Support() for the device this generator runs on.
  absl::Status bf16_support() const;

 private:
  ModelConfig config_;
  Generator generator_;
  c10::Device device_ = c10::Device(c10::kCPU);
};

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_SHOWER_GENERATOR_H_
