#include "workers/gan/generator.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace gantry::gan {

std::vector<ConvStageSpec> GeneratorStages(const ModelConfig& c) {
  const auto& f = c.generator_filters;
  auto stage = [&c](int64_t in, int64_t out, std::array<int64_t, 3> k, bool bn) {
    ConvStageSpec s;
    s.in_channels = in;
    s.out_channels = out;
    s.kernel = k;
    s.leaky_slope = c.leaky_slope;
    s.batch_norm = bn;
    s.bn_eps = c.generator_bn_eps;
    s.bn_momentum = c.bn_momentum;
    return s;
  };
  std::vector<ConvStageSpec> stages;
  if (!c.variable_angle()) {
    // Reference section A, steps 2-7.
    ConvStageSpec s0 = stage(c.dense_channels, f[0], {6, 6, 8}, true);
    s0.pad = ConvStageSpec::Same(s0.kernel);
    ConvStageSpec s1 = stage(f[0], f[1], {6, 5, 8}, true);
    s1.upsample = {2, 2, 2};
    s1.pad = ConvStageSpec::Symmetric(2, 2, 0);
    ConvStageSpec s2 = stage(f[1], f[2], {3, 3, 8}, false);
    s2.upsample = {2, 2, 3};
    s2.pad = ConvStageSpec::Symmetric(1, 0, 3);
    ConvStageSpec s3 = stage(f[2], 1, {2, 2, 2}, false);
    s3.bias = false;
    s3.activation = Activation::kRelu;
    stages = {s0, s1, s2, s3};
  } else {
    // Reference section B.
    ConvStageSpec s0 = stage(c.dense_channels, f[0], {6, 6, 8}, true);
    s0.upsample = {6, 6, 6};
    stages.push_back(s0);
    for (int i = 1; i <= 3; ++i) {
      ConvStageSpec s = stage(f[i - 1], f[i], {4, 4, 6}, true);
      s.pad = ConvStageSpec::Symmetric(2, 2, 1);
      stages.push_back(s);
    }
    ConvStageSpec s4 = stage(f[3], f[4], {3, 3, 5}, true);
    s4.pad = ConvStageSpec::Symmetric(1, 1, 0);
    ConvStageSpec s5 = stage(f[4], f[5], {3, 3, 3}, false);
    s5.pad = ConvStageSpec::Symmetric(1, 1, 0);
    ConvStageSpec s6 = stage(f[5], 1, {2, 2, 2}, false);
    s6.bias = false;
    stages.push_back(s4);
    stages.push_back(s5);
    stages.push_back(s6);
    for (auto& s : stages) s.activation = Activation::kRelu;
  }
  stages.back().relu_grad_slope = c.generator_relu_grad_slope;
  return stages;
}

GeneratorImpl::GeneratorImpl(const ModelConfig& config) : config_(config) {
  dense_shape_ = config.variable_angle() ? std::array<int64_t, 4>{config.dense_channels, 9, 9, 8}
                                         : std::array<int64_t, 4>{config.dense_channels, 7, 7, 8};
  const int64_t dense_out = dense_shape_[0] * dense_shape_[1] * dense_shape_[2] * dense_shape_[3];
  dense_ = register_module("dense", torch::nn::Linear(config.latent, dense_out));
  int i = 0;
  for (const ConvStageSpec& spec : GeneratorStages(config)) {
    stages_.push_back(register_module("stage" + std::to_string(i++), ConvStage(spec)));
  }
  if (config.generator_template) {
    shower_template_ = register_parameter(
        "shower_template",
        torch::zeros({2 + config.template_modes, config.grid[0], config.grid[1], config.grid[2]}));
  }
}

absl::Status GeneratorImpl::SetShowerTemplate(const std::vector<double>& values) {
  if (!shower_template_.defined()) {
    return absl::FailedPreconditionError("the generator has no shower template");
  }
  if (static_cast<int64_t>(values.size()) != shower_template_.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shower template: ", values.size(), " values for ", shower_template_.numel(), " cells"));
  }
  for (double v : values) {
    if (!std::isfinite(v))
      return absl::InvalidArgumentError("shower template: a value is not finite");
  }
  torch::NoGradGuard no_grad;
  shower_template_.copy_(
      at::tensor(at::ArrayRef<double>(values), at::kDouble).view(shower_template_.sizes()));
  return absl::OkStatus();
}

absl::Status GeneratorImpl::AdoptShowerTemplate(const torch::Tensor& other) {
  if (!shower_template_.defined()) {
    return absl::FailedPreconditionError("the generator has no shower template");
  }
  if (!other.defined() || other.dim() != 4 || other.size(0) < 2 ||
      other.sizes().slice(1) != shower_template_.sizes().slice(1)) {
    return absl::InvalidArgumentError("the other shower template is not a template of this grid");
  }
  torch::NoGradGuard no_grad;
  const int64_t rows = std::min(shower_template_.size(0), other.size(0));
  shower_template_.narrow(0, 0, rows).copy_(other.narrow(0, 0, rows));
  return absl::OkStatus();
}

torch::Tensor GeneratorImpl::forward(const torch::Tensor& input) {
  // A bfloat16 input runs the whole network in bfloat16 (parameters cast on the fly).
  const bool bf16 = input.scalar_type() == at::kBFloat16;
  torch::Tensor dense_input = input;
  torch::Tensor template_term;
  torch::Tensor residual_scale;  // template_relative_residual: the mean template, >= 0
  if (shower_template_.defined()) {
    // E/100 is the fixed-angle input's extra last column and the variable-angle input's first.
    torch::Tensor energy100;
    if (config_.variable_angle()) {
      energy100 = input.narrow(1, 0, 1);
      if (!config_.template_residual_noise) {  // E/100 and theta, the noise columns at 0
        dense_input = at::cat(
            {input.narrow(1, 0, 2), at::zeros_like(input.narrow(1, 2, input.size(1) - 2))}, 1);
      }
    } else {
      energy100 = input.narrow(1, config_.latent, 1);
      // The noise columns are noise x E/100; without noise each is E/100.
      dense_input = config_.template_residual_noise ? input.narrow(1, 0, config_.latent)
                                                    : energy100.expand({-1, config_.latent});
    }
    const torch::Tensor t = shower_template_.to(input.scalar_type());
    const torch::Tensor e = energy100.reshape({-1, 1, 1, 1, 1});
    template_term = e * (t[0] + at::log(e) * t[1]);
    if (config_.template_relative_residual) residual_scale = at::relu(template_term);
    const int64_t modes = config_.template_modes;
    if (modes > 0) {
      // e z_k: the fixed-angle input's first columns already are noise x E/100; the
      // variable-angle noise starts after E/100 and theta.
      const torch::Tensor scaled_noise = config_.variable_angle()
                                             ? input.narrow(1, 2, modes) * energy100
                                             : input.narrow(1, 0, modes);
      const torch::Tensor fluctuation =
          at::matmul(scaled_noise, t.narrow(0, 2, modes).reshape({modes, -1}));
      template_term = template_term +
                      fluctuation.view({-1, 1, config_.grid[0], config_.grid[1], config_.grid[2]});
    }
  }
  torch::Tensor x =
      (bf16 ? at::linear(dense_input, dense_->weight.to(at::kBFloat16),
                         dense_->bias.to(at::kBFloat16))
            : dense_->forward(dense_input))
          .view({-1, dense_shape_[0], dense_shape_[1], dense_shape_[2], dense_shape_[3]});
  for (size_t i = 0; i + 1 < stages_.size(); ++i) x = stages_[i]->forward(x);
  return stages_.back()->forward(x, c10::nullopt, template_term, residual_scale);
}

void GeneratorImpl::set_channels_last(bool on) {
  for (ConvStage& stage : stages_) stage->set_channels_last(on);
}

int64_t GeneratorImpl::noise_dim() const { return config_.noise_dim(); }

torch::Tensor GeneratorImpl::DrawSpotsStraightThrough(const torch::Tensor& expected,
                                                      at::Generator& rng) const {
  const double spot = config_.generator_spot_gev * config_.cell_scale;
  if (!config_.generator_spots || !(spot > 0)) return expected;
  torch::Tensor drawn;
  {
    torch::NoGradGuard no_grad;
    // `rng` is a CPU generator: the draw runs on the CPU whatever the device.
    const torch::Tensor mu = expected.detach().to(at::kCPU, at::kFloat);
    const torch::Tensor spots = at::poisson(mu / spot, rng);
    const double a = config_.generator_spot_shape;
    torch::Tensor cells = spots * spot;
    if (a > 0) {  // a cell of n spots: Gamma(n a, spot / a), drawn for the hit cells only
      const torch::Tensor flat = spots.reshape(-1);
      const torch::Tensor hit = flat.nonzero().squeeze(1);
      const torch::Tensor gamma = at::_standard_gamma(flat.index_select(0, hit) * a, rng);
      cells = at::zeros_like(flat).index_put_({hit}, gamma * (spot / a)).view_as(spots);
    }
    drawn = cells.to(expected.device(), expected.scalar_type());
  }
  // The value of the draw, the gradient of the expectation.
  return expected + (drawn - expected.detach());
}

torch::Tensor GeneratorImpl::MakeInput(const torch::Tensor& energy100, const torch::Tensor& theta,
                                       const torch::Tensor& noise) const {
  if (!config_.variable_angle()) {
    return shower_template_.defined() ? at::cat({noise * energy100, energy100}, 1)
                                      : noise * energy100;
  }
  return at::cat({energy100, theta, noise}, 1);
}

}  // namespace gantry::gan
