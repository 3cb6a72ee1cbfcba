#include "workers/gan/losses.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace gantry::gan {

at::Tensor BinaryCrossEntropy(const at::Tensor& probability, const at::Tensor& label) {
  constexpr double kEps = 1e-7;
  const at::Tensor p = at::clamp(probability, kEps, 1.0 - kEps);
  return -(label * at::log(p) + (1.0 - label) * at::log(1.0 - p)).mean();
}

at::Tensor MeanAbsolutePercentageError(const at::Tensor& prediction, const at::Tensor& label) {
  return 100.0 * ((label - prediction).abs() / at::clamp_min(label.abs(), 1e-7)).mean();
}

at::Tensor MeanAbsoluteError(const at::Tensor& prediction, const at::Tensor& label) {
  return (label - prediction).abs().mean();
}

LossTerms HeadLosses(const ModelConfig& config, const DiscriminatorOutput& out,
                     const HeadLabels& labels) {
  LossTerms t;
  t.parts.push_back(BinaryCrossEntropy(out.real_probability, labels.real));
  t.parts.push_back(MeanAbsolutePercentageError(out.energy, labels.energy100));
  if (config.variable_angle()) t.parts.push_back(MeanAbsoluteError(out.theta, labels.theta));
  t.parts.push_back(MeanAbsolutePercentageError(out.ecal, labels.ecal));
  t.total = t.parts[0] * config.loss_weights[0];
  for (size_t i = 1; i < t.parts.size(); ++i)
    t.total = t.total + t.parts[i] * config.loss_weights[i];
  return t;
}

ProfileLossTerm ProfileLoss(const ModelConfig& config, const at::Tensor& generated,
                            const at::Tensor& energy100, int world_size,
                            const std::function<void(at::Tensor&)>& cross_rank_sum) {
  const int64_t slices = config.profile_slices();
  // This rank's slice sums per unit e, x then y then z, and the fitted profile's.
  const at::Tensor per_e = generated.squeeze(1) / energy100.view({-1, 1, 1, 1});
  const at::Tensor sums =
      at::cat({per_e.sum({2, 3}), per_e.sum({1, 3}), per_e.sum({1, 2})}, 1).sum(0);
  const at::Tensor fit = at::tensor(config.profile_fit, at::kDouble).to(generated.scalar_type());
  const at::Tensor target = fit.slice(0, 0, slices) * static_cast<double>(energy100.size(0)) +
                            fit.slice(0, slices) * at::log(energy100).sum();
  // The global batch's: every rank's generated and fitted sums added.
  at::Tensor totals = at::cat({sums.detach(), target.detach()});
  if (world_size > 1 && cross_rank_sum) cross_rank_sum(totals);
  const at::Tensor diff = totals.slice(0, 0, slices) - totals.slice(0, slices);
  const at::Tensor scale = 100.0 / totals.slice(0, slices).sum().clamp_min(1e-30);
  ProfileLossTerm out;
  out.value = diff.abs().sum() * scale;
  const at::Tensor surrogate =
      (diff.sign() * sums).sum() * scale * static_cast<double>(std::max(1, world_size));
  out.loss = surrogate - surrogate.detach() + out.value;
  return out;
}

}  // namespace gantry::gan
