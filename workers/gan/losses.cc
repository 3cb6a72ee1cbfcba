#include "workers/gan/losses.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <tuple>

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

at::Tensor EcalReference(const at::Tensor& total, const at::Tensor& target) {
  return std::get<0>((total / at::clamp_min(target.abs(), 1e-7)).detach().sort(0));
}

at::Tensor EcalQuantileLoss(const at::Tensor& total, const at::Tensor& target,
                            const at::Tensor& reference) {
  const at::Tensor sorted = std::get<0>((total / at::clamp_min(target.abs(), 1e-7)).sort(0));
  return 100.0 * (sorted - reference.to(sorted.scalar_type())).abs().mean();
}

LossTerms HeadLosses(const ModelConfig& config, const DiscriminatorOutput& out,
                     const HeadLabels& labels) {
  return HeadLosses(config, out, labels, config.loss_weights);
}

std::vector<double> GeneratorLossWeights(const ModelConfig& config) {
  std::vector<double> weights = config.loss_weights;
  if (config.generator_energy_loss_weight >= 0) weights[1] = config.generator_energy_loss_weight;
  return weights;
}

LossTerms HeadLosses(const ModelConfig& config, const DiscriminatorOutput& out,
                     const HeadLabels& labels, const std::vector<double>& weights) {
  LossTerms t;
  t.parts.push_back(BinaryCrossEntropy(out.real_probability, labels.real));
  t.parts.push_back(MeanAbsolutePercentageError(out.energy, labels.energy100));
  if (config.variable_angle()) t.parts.push_back(MeanAbsoluteError(out.theta, labels.theta));
  if (labels.ecal_reference.defined()) {
    t.parts.push_back(EcalQuantileLoss(out.ecal, labels.ecal, labels.ecal_reference));
  } else if (config.ecal_loss_batch_mean || config.ecal_loss_quantiles) {
    t.parts.push_back(MeanAbsolutePercentageError(out.ecal.mean(), labels.ecal.mean()));
  } else {
    t.parts.push_back(MeanAbsolutePercentageError(out.ecal, labels.ecal));
  }
  t.total = t.parts[0] * weights[0];
  for (size_t i = 1; i < t.parts.size(); ++i) t.total = t.total + t.parts[i] * weights[i];
  return t;
}

ProfileLossTerm ProfileLoss(const ModelConfig& config, const at::Tensor& generated,
                            const at::Tensor& energy100, int64_t first_row, int world_size,
                            const std::function<void(at::Tensor&)>& cross_rank_sum) {
  const int64_t slices = config.profile_slices();
  const int64_t n = generated.size(0);
  const at::ScalarType dtype = generated.scalar_type();
  // Per shower: slice sums per unit e, x then y then z (n, slices), and the fitted profile's.
  const at::Tensor per_e = generated.squeeze(1) / energy100.view({-1, 1, 1, 1});
  const at::Tensor sums = at::cat({per_e.sum({2, 3}), per_e.sum({1, 3}), per_e.sum({1, 2})}, 1);
  const at::Tensor fit = at::tensor(config.profile_fit, at::kDouble).to(generated.device(), dtype);
  const at::Tensor target =
      fit.slice(0, 0, slices).unsqueeze(0) + at::log(energy100) * fit.slice(0, slices).unsqueeze(0);
  // The two halves of the global batch: its even rows (A) and its odd rows (B).
  const at::Tensor in_a =
      ((at::arange(n, at::TensorOptions(at::kLong).device(generated.device())) + first_row)
           .remainder(2) == 0)
          .to(dtype)
          .unsqueeze(1);
  const at::Tensor in_b = 1.0 - in_a;
  const at::Tensor sums_a = (sums * in_a).sum(0), sums_b = (sums * in_b).sum(0);
  // Every rank's sums added: [generated A, generated B, fitted A, fitted B, |A|, |B|].
  at::Tensor totals = at::cat({sums_a.detach(), sums_b.detach(), (target * in_a).sum(0),
                               (target * in_b).sum(0), in_a.sum(0), in_b.sum(0)});
  if (world_size > 1 && cross_rank_sum) cross_rank_sum(totals);
  const at::Tensor gen_a = totals.slice(0, 0, slices), gen_b = totals.slice(0, slices, 2 * slices);
  const at::Tensor fit_a = totals.slice(0, 2 * slices, 3 * slices);
  const at::Tensor fit_b = totals.slice(0, 3 * slices, 4 * slices);
  const double count_a = totals[4 * slices].item<double>();
  const double count_b = totals[4 * slices + 1].item<double>();
  const at::Tensor fit_total = (fit_a + fit_b).sum().clamp_min(1e-30);
  ProfileLossTerm out;
  out.value = (gen_a + gen_b - fit_a - fit_b).abs().sum() * (100.0 / fit_total);
  // The gradient of |G - F| is sign(G - F) per shower. Taken from the same showers, that sign
  // also pulls every batch's own fluctuation towards F: an L1 penalty on the spread of the batch
  // mean, which shrinks the shower-to-shower fluctuations it is made of. So each half's showers
  // take the sign of the other half's mean (independent of them), and in expectation the loss
  // moves only the mean profile. The scale is the whole batch's, times the number of ranks for
  // a hook that averages the ranks' gradients.
  const double ranks = static_cast<double>(std::max(1, world_size));
  at::Tensor surrogate;
  if (count_a > 0 && count_b > 0) {
    const at::Tensor sign_for_a = (gen_b / count_b - fit_b / count_b).sign();
    const at::Tensor sign_for_b = (gen_a / count_a - fit_a / count_a).sign();
    const double total = count_a + count_b;
    surrogate = ((sign_for_a * sums_a).sum() * (total / (2 * count_a)) +
                 (sign_for_b * sums_b).sum() * (total / (2 * count_b))) *
                (100.0 * ranks / fit_total);
  } else {  // one shower in the global batch
    surrogate = ((gen_a + gen_b - fit_a - fit_b).sign() * (sums_a + sums_b)).sum() *
                (100.0 * ranks / fit_total);
  }
  out.loss = surrogate - surrogate.detach() + out.value;
  return out;
}

}  // namespace gantry::gan
