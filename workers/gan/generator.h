// Generator: the 3DGAN generator network (reference sections A and B), conditioned on primary
// energy (and, for 3dgan-51, incidence angle). Works in preprocessed units (see preprocessing.h).
#ifndef GANTRY_WORKERS_GAN_GENERATOR_H_
#define GANTRY_WORKERS_GAN_GENERATOR_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <vector>

#include "absl/status/status.h"
#include "workers/gan/conv_stage.h"
#include "jobspec/model_config.h"

namespace gantry::gan {

class GeneratorImpl : public torch::nn::Module {
 public:
  // `config` must pass ValidateModelConfig.
  explicit GeneratorImpl(const ModelConfig& config);

  // input: as built by MakeInput. Returns (N, 1, x, y, z), >= 0, in the input's dtype:
  // a bfloat16 input (inference only) computes every layer in bfloat16 from bfloat16 copies of the
  // float32 parameters, BatchNorm applied as its running-statistics scale and shift.
  torch::Tensor forward(const torch::Tensor& input);

  // The conditioned latent vector: (E/100) * noise for 3dgan-25 (noise (N, latent)); concat[E/100,
  // theta, noise] for 3dgan-51 (noise (N, latent - 2)). energy100, theta: (N, 1); theta is ignored
  // (may be undefined) for the fixed-angle architecture. With a shower template the fixed-angle
  // input carries E/100 as one more, last column, which the template reads and the Linear does not.
  torch::Tensor MakeInput(const torch::Tensor& energy100, const torch::Tensor& theta,
                          const torch::Tensor& noise) const;
  // Width of the noise MakeInput expects.
  int64_t noise_dim() const;

  // ModelConfig::generator_spots, for training: a batch drawn around `expected` (forward's
  // output), each cell s Poisson(expected / s) with s the fitted spot energy in preprocessed units
  // (with generator_spot_shape a > 0, a cell of n spots Gamma(n a, s / a) instead),
  // from `rng` (a CPU generator; the draw runs on the CPU and comes back to `expected`'s device);
  // the gradient passes straight through to `expected`. Without spots (or before the spot energy
  // is fitted), `expected` itself. Computed in float32, returned in `expected`'s dtype. (Generation
  // draws each shower from its own (seed, index) stream instead: ShowerGenerator::DrawSpots.)
  torch::Tensor DrawSpotsStraightThrough(const torch::Tensor& expected, at::Generator& rng) const;

  // ModelConfig::generator_template: the learned (2 + K, x, y, z) template [a, b, M_1 .. M_K],
  // K = template_modes; with e = E / energy_scale and z the noise the generator adds
  // e (a + b ln e + z_1 M_1 + ... + z_K M_K) to its output before the final ReLU, in
  // preprocessed units. Undefined without one.
  const torch::Tensor& shower_template() const { return shower_template_; }
  // Sets the template to `values` (a, b, then the modes, (2 + K) x x * y * z values:
  // ConditionSample's shower_template). FAILED_PRECONDITION without a template, INVALID_ARGUMENT
  // for another size or a value that is not finite.
  absl::Status SetShowerTemplate(const std::vector<double>& values);
  // Fine-tuning: takes a, b and the modes both templates have from `other` (another generator's
  // shower_template, with any number of modes); this template's further modes stay as they are.
  // FAILED_PRECONDITION without a template, INVALID_ARGUMENT when `other` is not a template of
  // this grid.
  absl::Status AdoptShowerTemplate(const torch::Tensor& other);
  // Channels, x, y, z of the Linear output reshaped for the first conv stage.
  const std::array<int64_t, 4>& dense_shape() const { return dense_shape_; }

  const ModelConfig& config() const { return config_; }

  // Inference in the channels-last 3D layout (ConvStageImpl::set_channels_last) for every stage.
  void set_channels_last(bool on);
  // The conv stages, first to last (for per-stage measurements).
  const std::vector<ConvStage>& stages() const { return stages_; }

 private:
  ModelConfig config_;
  std::array<int64_t, 4> dense_shape_{};  // channels, x, y, z after the Linear
  torch::nn::Linear dense_{nullptr};
  std::vector<ConvStage> stages_;
  torch::Tensor shower_template_;
};
TORCH_MODULE(Generator);

// Layer specs of the generator's conv stages (also used by docs and tests).
std::vector<ConvStageSpec> GeneratorStages(const ModelConfig& config);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_GENERATOR_H_
