#include "workers/gan/discriminator.h"

#include <ATen/ATen.h>

#include <cmath>
#include <utility>

namespace gantry::gan {
namespace {

// Spatial size after the stages and the 2^3 average pool.
std::array<int64_t, 3> FeatureShape(const ModelConfig& c,
                                    const std::vector<ConvStageSpec>& stages) {
  std::array<int64_t, 3> size = c.grid;
  for (const auto& s : stages) {
    for (int i = 0; i < 3; ++i) {
      size[i] = static_cast<int64_t>(size[i] * s.upsample[i]) + s.pad[i][0] + s.pad[i][1] -
                s.kernel[i] + 1;
    }
  }
  for (auto& v : size) v /= 2;
  return size;
}

// The 2^3 average pool (floor mode). On a GPU as a view and a mean, whose backward is a broadcast:
// avg_pool3d's CUDA backward has no deterministic implementation (the deterministic mode refuses
// it). The CPU keeps avg_pool3d and with it its bit-for-bit results.
torch::Tensor AveragePool2(const torch::Tensor& x) {
  if (x.is_cpu()) return at::avg_pool3d(x, {2, 2, 2});
  const int64_t d = x.size(2) / 2, h = x.size(3) / 2, w = x.size(4) / 2;
  return x.slice(2, 0, 2 * d)
      .slice(3, 0, 2 * h)
      .slice(4, 0, 2 * w)
      .reshape({x.size(0), x.size(1), d, 2, h, 2, w, 2})
      .mean({3, 5, 7});
}

}  // namespace

std::vector<ConvStageSpec> DiscriminatorStages(const ModelConfig& c) {
  const auto& f = c.discriminator_filters;
  const std::array<int64_t, 3> k =
      c.variable_angle() ? std::array<int64_t, 3>{5, 6, 6} : std::array<int64_t, 3>{5, 5, 5};
  std::vector<ConvStageSpec> stages;
  for (int i = 0; i < 4; ++i) {
    ConvStageSpec s;
    s.in_channels = i == 0 ? 1 : f[i - 1];
    s.out_channels = f[i];
    s.kernel = k;
    s.leaky_slope = c.leaky_slope;
    s.batch_norm = i > 0;
    s.bn_eps = c.discriminator_bn_eps;
    s.bn_momentum = c.bn_momentum;
    s.dropout = c.dropout;
    stages.push_back(s);
  }
  stages[0].pad = ConvStageSpec::Same(k);
  if (!c.variable_angle()) {
    stages[1].pad = ConvStageSpec::Symmetric(2, 2, 2);
    stages[2].pad = ConvStageSpec::Symmetric(2, 2, 2);
    stages[3].pad = ConvStageSpec::Symmetric(1, 1, 1);
  } else {
    stages[1].pad = ConvStageSpec::Symmetric(0, 0, 1);
    stages[2].pad = ConvStageSpec::Symmetric(0, 0, 1);
  }
  return stages;
}

DiscriminatorImpl::DiscriminatorImpl(const ModelConfig& config) : config_(config) {
  const std::vector<ConvStageSpec> specs = DiscriminatorStages(config);
  int i = 0;
  for (const ConvStageSpec& spec : specs) {
    stages_.push_back(register_module("stage" + std::to_string(i++), ConvStage(spec)));
  }
  const auto shape = FeatureShape(config, specs);
  const int64_t features = shape[0] * shape[1] * shape[2] * specs.back().out_channels;
  real_fake_ = register_module("real_fake", torch::nn::Linear(features, 1));
  energy_ = register_module("energy", torch::nn::Linear(features, 1));
  if (const int64_t units = config.discriminator_feature_units; units > 0) {
    feature_hidden_ =
        register_module("feature_hidden", torch::nn::Linear(ShowerFeatureCount(config), units));
    feature_logit_ = register_module("feature_logit", torch::nn::Linear(2 * units, 1));
  }
}

DiscriminatorOutput DiscriminatorImpl::forward(const torch::Tensor& image,
                                               const torch::Tensor& energy100) {
  torch::Tensor x = DiscriminatorInput(image, config_.discriminator_log_scale);
  for (auto& stage : stages_) x = stage->forward(x, dropout_generator_);
  x = AveragePool2(x).flatten(1);
  // The feature head and the heads without parameters work in linear (undone power) units.
  const torch::Tensor linear =
      config_.cell_power == 1.0 ? image : at::pow(image, 1.0 / config_.cell_power);
  torch::Tensor logit = real_fake_->forward(x);
  if (feature_hidden_) {
    TORCH_CHECK(energy100.defined() && energy100.dim() == 2 && energy100.size(0) == image.size(0),
                "the discriminator's feature head needs E / energy_scale, (N, 1)");
    const torch::Tensor hidden = at::leaky_relu(
        feature_hidden_->forward(ShowerFeatures(linear, energy100, config_)), config_.leaky_slope);
    // Each unit's spread over the batch, the same for every row: a batch narrower than the
    // data's shows in it even where each of its showers alone looks real.
    const torch::Tensor spread =
        at::sqrt(hidden.var(0, /*unbiased=*/false, /*keepdim=*/true) + 1e-8).expand_as(hidden);
    logit = logit + feature_logit_->forward(at::cat({hidden, spread}, 1));
  }
  DiscriminatorOutput out;
  out.real_probability = at::sigmoid(logit);
  out.energy = energy_->forward(x);
  out.ecal = linear.sum({1, 2, 3, 4}).unsqueeze(1);
  if (config_.variable_angle()) out.theta = BarycentreAngle(linear);
  return out;
}

torch::Tensor DiscriminatorInput(const torch::Tensor& image, double log_scale) {
  if (log_scale == 0.0) return image;
  // Clamped at 0 so a negative cell (none after the generator's ReLU) cannot reach log(<= 0).
  return at::log1p(at::clamp_min(image, 0.0) / log_scale) * log_scale;
}

torch::Tensor ShowerFeatures(const torch::Tensor& linear, const torch::Tensor& energy100,
                             const ModelConfig& config) {
  const torch::Tensor img = linear.squeeze(1);  // (N, X, Y, Z)
  const int64_t nx = img.size(1), ny = img.size(2);
  const auto opts = img.options();
  // Cell positions from the grid's centre, in cells.
  const torch::Tensor xs = (at::arange(nx, opts) - 0.5 * (nx - 1)).view({1, nx, 1});
  const torch::Tensor ys = (at::arange(ny, opts) - 0.5 * (ny - 1)).view({1, ny, 1});
  const double tiny = config.cell_threshold;  // below any cell the preprocessing keeps
  const torch::Tensor px = img.sum(2);        // (N, X, Z)
  const torch::Tensor py = img.sum(1);        // (N, Y, Z)
  const torch::Tensor layer = px.sum(1);      // (N, Z)
  const torch::Tensor total = layer.sum(1, /*keepdim=*/true);
  const torch::Tensor layer_safe = layer + tiny;
  auto moments = [&](const torch::Tensor& p, const torch::Tensor& pos) {
    const torch::Tensor centre = (p * pos).sum(1) / layer_safe;
    const torch::Tensor second = (p * pos.square()).sum(1) / layer_safe;
    const torch::Tensor width = at::sqrt(at::clamp_min(second - centre.square(), 0.0) + 1e-4);
    return std::pair<torch::Tensor, torch::Tensor>(centre, width);
  };
  const auto [cx, wx] = moments(px, xs);
  const auto [cy, wy] = moments(py, ys);
  const double to_gev = 1.0 / config.cell_scale;
  const torch::Tensor e_gev = energy100.to(opts.dtype()) * config.energy_scale;
  const torch::Tensor total_gev = total * to_gev;
  return at::cat({at::log(at::clamp_min(e_gev, 1e-3)), at::log(total_gev + 1e-3),
                  at::log(total_gev / at::clamp_min(e_gev, 1e-3) + 1e-6), layer / (total + tiny),
                  cx, cy, wx, wy},
                 1);
}

torch::Tensor BarycentreAngle(const torch::Tensor& image) {
  constexpr double kEps = 1e-7;                // Keras epsilon
  const torch::Tensor img = image.squeeze(1);  // (N, X, Y, Z)
  const int64_t nx = img.size(1), ny = img.size(2), nz = img.size(3);
  const auto opts = img.options();
  const torch::Tensor xs = at::arange(nx, opts) + 0.5;
  const torch::Tensor ys = at::arange(ny, opts) + 0.5;
  const torch::Tensor zs = at::arange(nz, opts) + 0.5;
  // Divisions use safe denominators so masked-out branches never produce NaN gradients.
  const torch::Tensor sumtot = img.sum({1, 2, 3});
  const torch::Tensor empty = sumtot.eq(0);
  const torch::Tensor tot = at::where(empty, at::ones_like(sumtot), sumtot);
  const torch::Tensor x_ref = (img.sum({2, 3}) * xs).sum(1) / tot;
  const torch::Tensor y_ref = (img.sum({1, 3}) * ys).sum(1) / tot;
  const torch::Tensor z_ref = (img.sum({1, 2}) * zs).sum(1) / tot;
  const torch::Tensor sumz = img.sum({1, 2});  // (N, Z)
  const torch::Tensor zempty = sumz.eq(0);
  const torch::Tensor zsum = at::where(zempty, at::ones_like(sumz), sumz);
  const torch::Tensor x_mid = (img.sum(2) * xs.view({1, nx, 1})).sum(1) / zsum;
  const torch::Tensor y_mid = (img.sum(1) * ys.view({1, ny, 1})).sum(1) / zsum;
  const torch::Tensor dz = zs.view({1, nz}) - z_ref.unsqueeze(1);
  const torch::Tensor zproj =
      at::sqrt(at::clamp_min((y_mid - y_ref.unsqueeze(1)).square() + dz.square(), kEps));
  torch::Tensor m = (x_mid - x_ref.unsqueeze(1)) / zproj;
  m = at::where(dz.lt(0), -m, m);
  const torch::Tensor ang = M_PI / 2.0 - at::atan(m);
  const torch::Tensor mask = at::logical_and(zempty.logical_not(), zproj.ge(kEps)).to(opts.dtype());
  const torch::Tensor w = zs.view({1, nz}) * mask;
  const torch::Tensor wsum = w.sum(1);
  const torch::Tensor no_weight = wsum.eq(0);
  const torch::Tensor theta = (ang * w).sum(1) / at::where(no_weight, at::ones_like(wsum), wsum);
  return at::where(at::logical_or(empty, no_weight), at::full_like(theta, 100.0), theta)
      .unsqueeze(1);
}

}  // namespace gantry::gan
