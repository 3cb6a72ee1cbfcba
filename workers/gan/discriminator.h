// Discriminator: the 3DGAN discriminator network with its heads (real/fake probability, energy
// regression, ecal sum and, for 3dgan-51, the barycentre angle). Works in preprocessed units.
#ifndef GANTRY_WORKERS_GAN_DISCRIMINATOR_H_
#define GANTRY_WORKERS_GAN_DISCRIMINATOR_H_

#include <c10/util/Optional.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "workers/gan/conv_stage.h"
#include "jobspec/model_config.h"

namespace gantry::gan {

// All heads, each (N, 1). theta is undefined for the fixed-angle architecture.
struct DiscriminatorOutput {
  torch::Tensor real_probability;  // sigmoid
  torch::Tensor energy;            // regression of E / energy_scale
  torch::Tensor theta;             // measured barycentre angle (rad), 100 for empty images
  torch::Tensor ecal;              // sum of the image in ecal-target units
};

class DiscriminatorImpl : public torch::nn::Module {
 public:
  explicit DiscriminatorImpl(const ModelConfig& config);

  // image: (N, 1, x, y, z) preprocessed. The conv stages never receive E or theta; the feature
  // head (ModelConfig::discriminator_feature_units > 0) needs energy100 (N, 1), E / energy_scale,
  // and is the only part that reads it.
  DiscriminatorOutput forward(const torch::Tensor& image,
                              const torch::Tensor& energy100 = torch::Tensor());

  // Dropout masks come from this generator (deterministic training); unset: global default.
  void set_dropout_generator(c10::optional<at::Generator> generator) {
    dropout_generator_ = std::move(generator);
  }

  const ModelConfig& config() const { return config_; }

 private:
  ModelConfig config_;
  std::vector<ConvStage> stages_;
  torch::nn::Linear real_fake_{nullptr};
  torch::nn::Linear energy_{nullptr};
  torch::nn::Linear feature_hidden_{nullptr};  // the feature head (none when off)
  torch::nn::Linear feature_logit_{nullptr};
  c10::optional<at::Generator> dropout_generator_;
};
TORCH_MODULE(Discriminator);

std::vector<ConvStageSpec> DiscriminatorStages(const ModelConfig& config);

// What the conv stages see of a preprocessed image: the image itself for log_scale 0, else
// log_scale * log(1 + image / log_scale) (ModelConfig::discriminator_log_scale). Its gradient is
// 1 / (1 + image / log_scale): finite at empty cells, unlike a power below 1.
torch::Tensor DiscriminatorInput(const torch::Tensor& image, double log_scale);

// The feature head's inputs, (N, 3 + 5 z): per shower of `linear` (N, 1, x, y, z; linear units,
// the power undone) log E (GeV), log total (GeV), log sampling fraction (total / E), then per layer
// the layer's fraction of the total, its energy-weighted centroid in x and in y (cells from the
// grid's centre) and its width in x and in y (cells). An empty layer has fraction, centroid 0 and
// width 0.01 cells; every entry is finite for any non-negative image. energy100: (N, 1).
torch::Tensor ShowerFeatures(const torch::Tensor& linear, const torch::Tensor& energy100,
                             const ModelConfig& config);
inline int64_t ShowerFeatureCount(const ModelConfig& config) { return 3 + 5 * config.grid[2]; }

// The 3dgan-51 angle head: differentiable barycentre angle (rad) of raw (N, 1, x, y, z) images in
// linear energy units; the shower axis tilts along x with depth z. 100 for empty images.
torch::Tensor BarycentreAngle(const torch::Tensor& image);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_DISCRIMINATOR_H_
