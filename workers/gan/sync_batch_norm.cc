#include "workers/gan/sync_batch_norm.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/autograd.h>
#include <torch/custom_class.h>

#include <utility>
#include <vector>

namespace gantry::gan {
namespace {

// Carries the cross-rank sum through the autograd context to the backward.
struct SumHolder : torch::CustomClassHolder {
  explicit SumHolder(std::shared_ptr<const CrossRankSum> f) : sum(std::move(f)) {}
  std::shared_ptr<const CrossRankSum> sum;
};

std::vector<int64_t> ReduceDims(const at::Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

std::vector<int64_t> ChannelShape(const at::Tensor& x) {
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  return shape;
}

class SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                            const at::Tensor& weight, const at::Tensor& bias,
                            at::Tensor running_mean, at::Tensor running_var, double eps,
                            double momentum, const c10::IValue& sum) {
    const auto holder = c10::static_intrusive_pointer_cast<SumHolder>(sum.toCapsule());
    const at::Tensor x = input.contiguous();
    const int64_t channels = x.size(1);
    const std::vector<int64_t> dims = ReduceDims(x);
    const double count = static_cast<double>(x.numel() / channels);
    // Local moments via ATen's accurate var_mean, then [sum, sum of squares, count] in float64 so
    // the global variance S2/N - mean^2 does not cancel badly.
    auto [var, mean] = at::var_mean(x, dims, /*unbiased=*/false);
    const at::Tensor mean64 = mean.to(at::kDouble);
    const at::Tensor sum1 = mean64 * count;
    const at::Tensor sum2 = (var.to(at::kDouble) + mean64 * mean64) * count;
    at::Tensor stats = at::cat({sum1, sum2, at::full({1}, count, mean64.options())});
    (*holder->sum)(stats);
    const double total = stats[2 * channels].item<double>();
    TORCH_CHECK(total > 1, "synchronised BatchNorm needs more than one value per channel");
    const at::Tensor global_mean = stats.slice(0, 0, channels) / total;
    const at::Tensor global_var = at::clamp_min(
        stats.slice(0, channels, 2 * channels) / total - global_mean * global_mean, 0);
    const at::Tensor invstd = at::rsqrt(global_var + eps);
    {
      at::NoGradGuard no_grad;
      running_mean.mul_(1 - momentum).add_(global_mean.to(running_mean.scalar_type()), momentum);
      running_var.mul_(1 - momentum)
          .add_((global_var * (total / (total - 1))).to(running_var.scalar_type()), momentum);
    }
    const std::vector<int64_t> shape = ChannelShape(x);
    const at::Tensor mean_f = global_mean.to(x.scalar_type());
    const at::Tensor invstd_f = invstd.to(x.scalar_type());
    const at::Tensor scale = invstd_f * weight;
    const at::Tensor shift = bias - mean_f * scale;
    at::Tensor out = x * scale.view(shape) + shift.view(shape);
    ctx->save_for_backward({x, weight, mean_f, invstd_f});
    ctx->saved_data["total"] = total;
    ctx->saved_data["sum"] = sum;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& mean = saved[2];
    const at::Tensor& invstd = saved[3];
    const double total = ctx->saved_data["total"].toDouble();
    const auto holder =
        c10::static_intrusive_pointer_cast<SumHolder>(ctx->saved_data["sum"].toCapsule());
    const at::Tensor dy = grads[0].contiguous();
    const std::vector<int64_t> dims = ReduceDims(x);
    const std::vector<int64_t> shape = ChannelShape(x);
    const int64_t channels = x.size(1);
    const at::Tensor xhat = (x - mean.view(shape)) * invstd.view(shape);
    const at::Tensor sum_dy = dy.sum(dims);
    const at::Tensor sum_dy_xhat = (dy * xhat).sum(dims);
    at::Tensor grad_input, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) {
      at::Tensor sums = at::cat({sum_dy, sum_dy_xhat}).to(at::kDouble);
      (*holder->sum)(sums);
      const at::Tensor mean_dy = (sums.slice(0, 0, channels) / total).to(x.scalar_type());
      const at::Tensor mean_dy_xhat =
          (sums.slice(0, channels, 2 * channels) / total).to(x.scalar_type());
      grad_input = (dy - mean_dy.view(shape) - xhat * mean_dy_xhat.view(shape)) *
                   (invstd * weight).view(shape);
    }
    if (ctx->needs_input_grad(1)) grad_weight = sum_dy_xhat;
    if (ctx->needs_input_grad(2)) grad_bias = sum_dy;
    return {grad_input,   grad_weight,  grad_bias,    at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor SyncBatchNorm(const at::Tensor& input, torch::nn::BatchNorm3dImpl& bn,
                         const std::shared_ptr<const CrossRankSum>& cross_rank_sum) {
  const auto& o = bn.options;
  TORCH_CHECK(o.affine() && o.track_running_stats() && o.momentum().has_value(),
              "synchronised BatchNorm needs an affine layer with running statistics and momentum");
  {
    at::NoGradGuard no_grad;
    bn.num_batches_tracked.add_(1);
  }
  const c10::IValue sum = c10::IValue::make_capsule(c10::make_intrusive<SumHolder>(cross_rank_sum));
  return SyncBatchNormFunction::apply(input, bn.weight, bn.bias, bn.running_mean, bn.running_var,
                                      o.eps(), *o.momentum(), sum);
}

}  // namespace gantry::gan
