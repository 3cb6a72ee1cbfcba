#include "workers/gan/losses.h"

#include <ATen/ATen.h>

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

}  // namespace gantry::gan
