// Losses: the Keras-equivalent loss functions of the 3DGAN and the weighted sum over the
// discriminator heads.
#ifndef GANTRY_WORKERS_GAN_LOSSES_H_
#define GANTRY_WORKERS_GAN_LOSSES_H_

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

#include "workers/gan/discriminator.h"
#include "jobspec/model_config.h"

namespace gantry::gan {

// Keras binary_crossentropy: predictions clipped to [1e-7, 1 - 1e-7].
at::Tensor BinaryCrossEntropy(const at::Tensor& probability, const at::Tensor& label);
// Keras MAPE: 100 * mean(|label - pred| / max(|label|, 1e-7)) (divides by the label).
at::Tensor MeanAbsolutePercentageError(const at::Tensor& prediction, const at::Tensor& label);
at::Tensor MeanAbsoluteError(const at::Tensor& prediction, const at::Tensor& label);

// Labels of one discriminator evaluation, each (N, 1).
struct HeadLabels {
  at::Tensor real;       // 1 real, 0 fake (after label flipping)
  at::Tensor energy100;  // E / energy_scale
  at::Tensor theta;      // rad; variable angle only
  at::Tensor ecal;       // ecal-sum label
  // The real batch's sorted ratios total / ecal target, (N, 1), for the distribution form of the
  // ecal loss (ModelConfig::ecal_loss_quantiles; the generator's update only); undefined otherwise.
  at::Tensor ecal_reference;
};

// parts = [BCE, MAPE(E), MAPE(ecal)] or [BCE, MAPE(E), MAE(theta), MAPE(ecal)];
// total = sum of weights[i] * parts[i], weights config.loss_weights unless given. The ecal part:
// with labels.ecal_reference, the distance between the sorted ratios out.ecal / labels.ecal and it
// (EcalQuantileLoss); else, with ModelConfig::ecal_loss_batch_mean or ecal_loss_quantiles, the
// MAPE of the batch means; else the MAPE per shower.
struct LossTerms {
  at::Tensor total;
  std::vector<at::Tensor> parts;
};
// 100 x mean_i |g_(i) - r_(i)|: g the ratios total / target sorted, r `reference` (sorted, as
// many rows). Differentiable in `total` (through the sort's permutation).
at::Tensor EcalQuantileLoss(const at::Tensor& total, const at::Tensor& target,
                            const at::Tensor& reference);
// The sorted ratios total / target of a real batch: the reference of EcalQuantileLoss.
at::Tensor EcalReference(const at::Tensor& total, const at::Tensor& target);

LossTerms HeadLosses(const ModelConfig& config, const DiscriminatorOutput& out,
                     const HeadLabels& labels);
LossTerms HeadLosses(const ModelConfig& config, const DiscriminatorOutput& out,
                     const HeadLabels& labels, const std::vector<double>& weights);
// The head weights of the generator's updates: loss_weights, the energy head's replaced by
// ModelConfig::generator_energy_loss_weight when that is >= 0.
std::vector<double> GeneratorLossWeights(const ModelConfig& config);

// The generator's profile loss (ModelConfig::profile_loss_weight): 100 x sum_i |G_i - F_i| /
// sum_i F_i over the x, y and z slices, G_i the slice sums per unit e of `generated`
// (N, 1, x, y, z) and F_i those of the fitted profile (profile_fit) at `energy100` (N, 1), over
// the global batch: the rows are its rows first_row .. first_row + N - 1, and with world_size > 1
// cross_rank_sum adds every rank's sums. The gradient each shower gets is the sign of the other
// half of the batch (its even rows for the odd ones and back), so the loss moves the mean profile
// and not the spread between showers; times world_size, for a data-parallel hook that averages
// the ranks' gradients.
struct ProfileLossTerm {
  at::Tensor value;  // the global batch's loss, without gradient
  at::Tensor loss;   // equal to value, with the gradient above
};
ProfileLossTerm ProfileLoss(const ModelConfig& config, const at::Tensor& generated,
                            const at::Tensor& energy100, int64_t first_row, int world_size,
                            const std::function<void(at::Tensor&)>& cross_rank_sum);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_LOSSES_H_
