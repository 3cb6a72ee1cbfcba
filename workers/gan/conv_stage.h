// ConvStage: one "[upsample] -> zero pad -> Conv3d -> activation -> [BatchNorm] -> [dropout]" block
// of the 3DGAN networks, with Keras-equivalent padding and BatchNorm settings.
#ifndef GANTRY_WORKERS_GAN_CONV_STAGE_H_
#define GANTRY_WORKERS_GAN_CONV_STAGE_H_

#include <c10/util/Optional.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "workers/gan/sync_batch_norm.h"

namespace gantry::gan {

enum class Activation { kLeakyRelu, kRelu };

struct ConvStageSpec {
  std::array<double, 3> upsample{1, 1, 1};  // nearest-neighbour factors applied first
  // Zero padding before the conv, (before, after) per axis x, y, z.
  std::array<std::array<int64_t, 2>, 3> pad{{{0, 0}, {0, 0}, {0, 0}}};
  int64_t in_channels = 1;
  int64_t out_channels = 1;
  std::array<int64_t, 3> kernel{1, 1, 1};
  bool bias = true;
  Activation activation = Activation::kLeakyRelu;
  double leaky_slope = 0.3;
  // kRelu only, training only: the gradient slope passed back for inputs the ReLU clamps to 0
  // (0: the exact ReLU gradient). The forward pass is unchanged.
  double relu_grad_slope = 0.0;
  bool batch_norm = false;
  double bn_eps = 1e-3;
  double bn_momentum = 0.01;
  double dropout = 0.0;  // applied in training mode only

  // TensorFlow "same" padding for a stride-1 kernel: (k-1)/2 before, the rest after.
  static std::array<std::array<int64_t, 2>, 3> Same(std::array<int64_t, 3> kernel);
  static std::array<std::array<int64_t, 2>, 3> Symmetric(int64_t x, int64_t y, int64_t z);
};

// How the stages' convs compute input gradients in training; both are exact. kAuto: oneDNN's
// backward-data kernel on CPUs without AVX-512 (faster there), a forward conv with the flipped
// kernel on CPUs with it. Process-wide; tests set it to run both paths on one machine.
enum class InputGradientKernel { kAuto, kBackwardData, kForwardConv };
void SetInputGradientKernel(InputGradientKernel kernel);

// How the stages' convs with few output channels (at most 8) run forward in training on the CPU;
// both are exact. kTapFolded: the kernel's x taps as output channels of one conv, summed with
// their x shifts afterwards. kAuto: kTapFolded where it measured faster (at least 16 input
// channels, no AVX-512; UseTapFoldedForward in conv_stage.cc), kDirect otherwise. Process-wide;
// tests and benchmarks set it.
enum class FewChannelForward { kAuto, kDirect, kTapFolded };
void SetFewChannelForward(FewChannelForward kernel);

// How inference (eval mode, no autograd) runs a stage's conv when it has at most two output
// channels and at most 27 taps and no upsampling: kDirect, one conv3d; kTapSum, TapSumConv3d.
// kAuto: kDirect (kTapSum is measured on a GPU by tests/gpu). Process-wide; tests and benchmarks set it.
enum class FewChannelInference { kAuto, kDirect, kTapSum };
void SetFewChannelInference(FewChannelInference kernel);

// A stride-1 conv3d with symmetric padding `pad` as a 1x1x1 conv to taps x cout channels (one per
// kernel tap and output channel) followed by the sum of each tap's shifted window: the same
// multiply-adds in another order, as matrix products and element-wise adds instead of a conv with
// one output channel. Any device, float or bfloat16; `bias` may be undefined.
at::Tensor TapSumConv3d(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                        std::array<int64_t, 3> pad);

// The dropout multiplier of a ConvStage training on the CPU: a contiguous CPU tensor shaped and
// typed like `like` (float32 or float64) whose elements are 1 / keep with probability keep, else 0.
// Draws one number from `generator` (nullopt: the global default); the same generator state gives
// the same mask whatever the thread count.
at::Tensor ScaledDropoutMask(const at::Tensor& like, double keep,
                             const c10::optional<at::Generator>& generator);

// An upsampling stage (nearest, integer factors f) followed by its pad and conv, rewritten as one
// conv on the coarse grid: `weight` [out * f0 f1 f2, in, taps...] and `bias` (undefined without
// one) give every phase at once; the caller pads the input by `pad` (F.pad order, z first; negative
// crops), convolves with no padding, views the result as [N, out, f0, f1, f2, q0, q1, q2], permutes
// it to [N, out, q0, f0, q1, f1, q2, f2], reshapes to [N, out, q0 f0, q1 f1, q2 f2] and keeps the
// first `out_size` cells of each axis. Exactly the literal upsample -> pad -> conv.
struct PolyphasePlan {
  torch::Tensor weight, bias;
  std::vector<int64_t> pad;              // 6 values
  std::array<int64_t, 3> factor{};       // f
  std::array<int64_t, 3> phases_size{};  // q: coarse cells per axis of the conv's output
  std::array<int64_t, 3> out_size{};
};
// The plan for `spec` (integer upsample factors) with the stage's conv `weight` and `bias`, for an
// input of spatial size `in_size`.
PolyphasePlan PlanPolyphase(const ConvStageSpec& spec, const torch::Tensor& weight,
                            const torch::Tensor& bias, std::array<int64_t, 3> in_size);

class ConvStageImpl : public torch::nn::Module {
 public:
  explicit ConvStageImpl(const ConvStageSpec& spec);

  // `generator` drives the dropout mask (nullopt: the global default generator). `x` is float32,
  // float64 or (inference only) bfloat16; the output has its dtype. `add_before_activation`, when
  // defined, is added to the conv output (broadcasting) before the activation, after the conv
  // output is multiplied by `scale_before_add` when that is defined.
  torch::Tensor forward(torch::Tensor x,
                        const c10::optional<at::Generator>& generator = c10::nullopt,
                        const torch::Tensor& add_before_activation = torch::Tensor(),
                        const torch::Tensor& scale_before_add = torch::Tensor());

  const ConvStageSpec& spec() const { return spec_; }

  // Upsampling stages run as one polyphase conv on the coarse grid (default) or, when off, as the
  // literal upsample -> pad -> conv (reference path, used by tests).
  void set_polyphase(bool on) { polyphase_ = on; }

  // Inference (eval mode, no autograd) in the channels-last 3D layout (NDHWC) for activations and
  // weights; the output keeps that layout. Off by default: a per-device choice by measurement
  // (docs/BENCHMARKS.md "GPU"). Same function up to float rounding.
  void set_channels_last(bool on) { channels_last_ = on; }

  // When set, BatchNorm in training mode normalises over the global batch of all data-parallel
  // ranks (SyncBatchNorm); null (the default) keeps torch's local BatchNorm.
  void set_cross_rank_sum(std::shared_ptr<const CrossRankSum> sum) {
    cross_rank_sum_ = std::move(sum);
  }

 private:
  // What inference derives from the parameters: the conv's weight and bias in the input's dtype and
  // layout (as the polyphase plan for an upsampling stage), and a bfloat16 BatchNorm as one scale
  // and shift. Kept until a parameter changes (its data or version) or the input's dtype, device,
  // layout or grid does: without it every pass rebuilt the plan, with host-to-device copies that
  // made the host wait for the GPU at each upsampling stage.
  struct InferenceWeights;
  std::shared_ptr<const InferenceWeights> InferenceWeightsFor(const torch::Tensor& x);
  // Whether `x` takes the polyphase path (integer upsampling, float32 or bfloat16).
  bool Polyphased(const torch::Tensor& x) const;
  torch::Tensor PolyphaseForward(const torch::Tensor& x, const PolyphasePlan& plan);
  // BatchNorm's running statistics for bfloat16 inference as one per-channel scale and shift
  // (computed in float32), each shaped [1, C, 1, 1, 1].
  std::pair<at::Tensor, at::Tensor> Bf16BatchNormScaleShift() const;
  static torch::Tensor Convolve(const torch::Tensor& x, const torch::Tensor& weight,
                                const torch::Tensor& bias, std::array<int64_t, 3> pad);

  ConvStageSpec spec_;
  bool polyphase_ = true;
  bool channels_last_ = false;
  // The symmetric part of the padding lives inside the conv (no copy); only the asymmetric
  // remainder is applied with an explicit pad. F.pad order: z, y, x.
  std::array<int64_t, 6> extra_pad_{};
  bool has_extra_pad_ = false;
  std::array<int64_t, 3> conv_pad_{};  // symmetric padding done by the conv itself
  torch::nn::Conv3d conv_{nullptr};
  torch::nn::BatchNorm3d bn_{nullptr};
  std::shared_ptr<const CrossRankSum> cross_rank_sum_;
  std::mutex inference_mutex_;  // guards inference_weights_
  std::shared_ptr<const InferenceWeights> inference_weights_;
};
TORCH_MODULE(ConvStage);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_CONV_STAGE_H_
