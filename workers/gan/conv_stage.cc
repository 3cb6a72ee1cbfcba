#include "workers/gan/conv_stage.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace gantry::gan {

std::array<std::array<int64_t, 2>, 3> ConvStageSpec::Same(std::array<int64_t, 3> kernel) {
  std::array<std::array<int64_t, 2>, 3> pad{};
  for (int i = 0; i < 3; ++i) {
    pad[i] = {(kernel[i] - 1) / 2, kernel[i] - 1 - (kernel[i] - 1) / 2};
  }
  return pad;
}

std::array<std::array<int64_t, 2>, 3> ConvStageSpec::Symmetric(int64_t x, int64_t y, int64_t z) {
  return {{{x, x}, {y, y}, {z, z}}};
}

ConvStageImpl::ConvStageImpl(const ConvStageSpec& spec) : spec_(spec) {
  std::vector<int64_t> inner(3);
  for (int i = 0; i < 3; ++i) {
    inner[i] = std::min(spec.pad[i][0], spec.pad[i][1]);
    const int64_t before = spec.pad[i][0] - inner[i];
    const int64_t after = spec.pad[i][1] - inner[i];
    extra_pad_[2 * (2 - i)] = before;
    extra_pad_[2 * (2 - i) + 1] = after;
    if (before != 0 || after != 0) has_extra_pad_ = true;
  }
  conv_ = register_module(
      "conv",
      torch::nn::Conv3d(torch::nn::Conv3dOptions(spec.in_channels, spec.out_channels,
                                                 {spec.kernel[0], spec.kernel[1], spec.kernel[2]})
                            .padding(std::vector<int64_t>(inner))
                            .bias(spec.bias)));
  if (spec.batch_norm) {
    bn_ = register_module("bn",
                          torch::nn::BatchNorm3d(torch::nn::BatchNorm3dOptions(spec.out_channels)
                                                     .eps(spec.bn_eps)
                                                     .momentum(spec.bn_momentum)));
  }
}

torch::Tensor ConvStageImpl::forward(torch::Tensor x,
                                     const c10::optional<at::Generator>& generator) {
  const auto& up = spec_.upsample;
  if (up[0] != 1 || up[1] != 1 || up[2] != 1) {
    std::vector<int64_t> size = {static_cast<int64_t>(x.size(2) * up[0]),
                                 static_cast<int64_t>(x.size(3) * up[1]),
                                 static_cast<int64_t>(x.size(4) * up[2])};
    x = at::upsample_nearest3d(x, size, up[0], up[1], up[2]);
  }
  if (has_extra_pad_) x = at::constant_pad_nd(x, extra_pad_, 0);
  x = conv_->forward(x);
  // In place: the conv output is a fresh tensor and both activations support in-place autograd.
  if (spec_.activation == Activation::kLeakyRelu) {
    at::leaky_relu_(x, spec_.leaky_slope);
  } else {
    at::relu_(x);
  }
  if (spec_.batch_norm) x = bn_->forward(x);
  if (spec_.dropout > 0 && is_training()) {
    const double keep = 1.0 - spec_.dropout;
    at::Tensor mask = at::empty_like(x).bernoulli_(keep, generator);
    x = x * mask.div_(keep);
  }
  return x;
}

}  // namespace gantry::gan
