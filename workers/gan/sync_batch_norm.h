// SyncBatchNorm: training-mode batch normalisation whose statistics cover the union of every
// data-parallel rank's batch (the global batch), through a caller-supplied cross-rank sum.
#ifndef GANTRY_WORKERS_GAN_SYNC_BATCH_NORM_H_
#define GANTRY_WORKERS_GAN_SYNC_BATCH_NORM_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/batchnorm.h>

#include <functional>
#include <memory>

namespace gantry::gan {

// In-place sum of a tensor over all ranks (every rank calls it with the same shape, in the same
// order). Set by workers/distributed's DataParallel; it runs inside forward and backward and
// reports failures by throwing c10::Error.
using CrossRankSum = std::function<void(at::Tensor&)>;

// Normalises `input` (N, C, spatial...) with the mean and biased variance over all ranks' samples
// and applies bn's affine weight and bias. Differentiable: the backward sums [sum dy, sum dy*xhat]
// over ranks too, so each rank's input gradient is that of one BatchNorm over the concatenated
// batch for the loss sum_r loss_r, and the weight/bias gradients are this rank's share (their sum
// over ranks is the global gradient). Updates bn's running mean and unbiased variance from the
// global statistics (so they stay identical on every rank) and num_batches_tracked.
// Cross-rank traffic: forward one sum of [sum x, sum x^2, count] (float64, 2C+1 values), backward
// one of [sum dy, sum dy*xhat] (float64, 2C). For training mode; bn must be affine, track running
// statistics and have a momentum.
at::Tensor SyncBatchNorm(const at::Tensor& input, torch::nn::BatchNorm3dImpl& bn,
                         const std::shared_ptr<const CrossRankSum>& cross_rank_sum);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_SYNC_BATCH_NORM_H_
