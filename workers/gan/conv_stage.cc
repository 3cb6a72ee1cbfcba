#include "workers/gan/conv_stage.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/PhiloxRNGEngine.h>
#include <torch/autograd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

namespace gantry::gan {

namespace {

// Input gradient of a stride-1 conv as a forward convolution with the flipped, transposed kernel
// ("full" padding pad_full). When the conv's input has one channel, this forward conv has one
// output channel, where oneDNN fills one lane of each vector (as slow as eight output channels);
// then the z taps of the kernel become output channels of a conv with a k x k x 1 kernel and
// are summed with their z shifts afterwards: same sums, ~3x less time (D's 1 -> 32 input conv).
at::Tensor ConvInputGradient(const at::Tensor& grad, const at::Tensor& weight,
                             const std::vector<int64_t>& pad_full) {
  const at::Tensor flipped = weight.flip({2, 3, 4}).transpose(0, 1);  // (cin, cout, kx, ky, kz)
  const int64_t kz = weight.size(4);
  if (weight.size(1) != 1 || kz == 1) {
    return at::conv3d(grad, flipped.contiguous(), {}, {1, 1, 1}, pad_full);
  }
  // (kz, cout, kx, ky, 1): output channel t holds the taps of flipped z index t.
  const at::Tensor taps = flipped[0].permute({3, 0, 1, 2}).unsqueeze(4).contiguous();
  const at::Tensor per_tap =
      at::conv3d(grad, taps, {}, {1, 1, 1}, {pad_full[0], pad_full[1], 0});  // (N, kz, X, Y, Zg)
  // input z = output z + t - pad_full[2]; pad so every shifted slice is in range.
  const at::Tensor padded = at::constant_pad_nd(per_tap, {pad_full[2], pad_full[2]}, 0);
  const int64_t z_in = grad.size(4) + 2 * pad_full[2] - kz + 1;
  at::Tensor out = padded.slice(1, 0, 1).slice(4, 0, z_in).clone();
  for (int64_t t = 1; t < kz; ++t) out.add_(padded.slice(1, t, t + 1).slice(4, t, t + z_in));
  return out;
}

// Stride-1 conv3d with symmetric padding `pad` whose kx taps along x become output channels: one
// conv with a 1 x ky x kz kernel and kx * cout output channels, then each output row (one x plane)
// is the sum of kx planes of it, shifted along x. Same multiply-adds; oneDNN's `jit:avx2` forward
// kernel blocks output channels by 8, so with 8 output channels each input load feeds one vector
// FMA and the kernel is load-bound (~20 GMAC/s for D's 32 -> 8 conv), with 40 it is not.
at::Tensor TapFoldedConv3d(const at::Tensor& input, const at::Tensor& weight,
                           const at::Tensor& bias, const std::vector<int64_t>& pad) {
  const int64_t cout = weight.size(0), kx = weight.size(2);
  // (kx * cout, cin, 1, ky, kz): output channel t * cout + o holds x tap t of output channel o.
  const at::Tensor folded =
      weight.permute({2, 0, 1, 3, 4})
          .reshape({kx * cout, weight.size(1), 1, weight.size(3), weight.size(4)})
          .contiguous();
  const at::Tensor per_tap =
      at::conv3d(input, folded, {}, {1, 1, 1}, {0, pad[1], pad[2]}).contiguous();
  const int64_t batch = input.size(0), x_in = input.size(2);
  const int64_t x_out = x_in + 2 * pad[0] - kx + 1;
  const int64_t plane = per_tap.size(3) * per_tap.size(4);
  at::Tensor out = at::empty({batch, cout, x_out, per_tap.size(3), per_tap.size(4)},
                             per_tap.options().memory_format(at::MemoryFormat::Contiguous));
  const at::Tensor bias_values =
      bias.defined() ? bias.contiguous() : at::zeros({cout}, out.options());
  const int64_t x_pad = pad[0];
  AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "TapFoldedConv3d", [&] {
    const scalar_t* taps = per_tap.data_ptr<scalar_t>();
    const scalar_t* bias_of = bias_values.data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / (kx * plane));
    at::parallel_for(0, batch * cout * x_out, grain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {  // row = (sample, channel, output x)
        const int64_t i = row % x_out;
        const int64_t o = (row / x_out) % cout;
        const int64_t sample = row / (x_out * cout);
        scalar_t* d = dst + row * plane;
        std::fill(d, d + plane, bias_of[o]);
        for (int64_t t = 0; t < kx; ++t) {
          const int64_t source_x = i + t - x_pad;  // input x read by tap t
          if (source_x < 0 || source_x >= x_in) continue;
          const scalar_t* p =
              taps + ((sample * kx + t) * cout + o) * x_in * plane + source_x * plane;
          for (int64_t j = 0; j < plane; ++j) d[j] += p[j];
        }
      }
    });
  });
  return out;
}

// Weight and bias gradients of a stride-1 conv by oneDNN's backward-weights kernel, on an input
// padded beforehand when it has several channels. Given the padding itself, oneDNN 2.6 falls back
// to its im2col + GEMM kernel (`x64:gemm:jit`) for these 3D shapes, 10-25x slower than its direct
// `jit:avx2` kernel on the padded copy (32 -> 8 at batch 16, 2 threads: 6.5 s against 0.28 s,
// and half the time of the weight gradient as a forward conv with the batch as channels; the
// pad copy costs 0.04 s). For one input channel (1 -> 32) the GEMM kernel is the faster one
// (batch 64: 0.22 s against 0.81 s).
std::pair<at::Tensor, at::Tensor> ConvParameterGradients(const at::Tensor& grad,
                                                         const at::Tensor& input,
                                                         const at::Tensor& weight,
                                                         const std::vector<int64_t>& pad,
                                                         bool want_weight, bool want_bias) {
  const int64_t cout = weight.size(0);
  const bool pad_copy =
      want_weight && weight.size(1) > 1 && (pad[0] != 0 || pad[1] != 0 || pad[2] != 0);
  const at::Tensor source =
      pad_copy ? at::constant_pad_nd(input, {pad[2], pad[2], pad[1], pad[1], pad[0], pad[0]}, 0)
               : input;
  const std::vector<int64_t> source_pad = pad_copy ? std::vector<int64_t>{0, 0, 0} : pad;
  const std::vector<int64_t> bias_sizes = {cout};
  auto r = at::convolution_backward(
      grad, source, weight,
      want_bias ? c10::OptionalIntArrayRef(bias_sizes) : c10::OptionalIntArrayRef(), {1, 1, 1},
      source_pad, {1, 1, 1}, false, {0, 0, 0}, 1, {false, want_weight, want_bias});
  return {std::get<1>(r), std::get<2>(r)};
}

// Which input-gradient kernel a CPU without AVX-512 runs: oneDNN's `jit:avx2` backward-data
// kernel beats the forward-conv form there (8 -> 8 at batch 16, 2 threads: 0.080 s against 0.128
// s); with AVX-512 its backward-data kernel was 4-8x slower than the forward form (2 -> 2, batch
// 4).
std::atomic<InputGradientKernel> input_gradient_kernel{InputGradientKernel::kAuto};

bool UseBackwardDataKernel(const at::Tensor& weight) {
  if (weight.size(1) == 1) return false;  // the z-tap form is faster for one input channel
  switch (input_gradient_kernel.load(std::memory_order_relaxed)) {
    case InputGradientKernel::kBackwardData:
      return true;
    case InputGradientKernel::kForwardConv:
      return false;
    case InputGradientKernel::kAuto:
      break;
  }
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return !avx512;
}

std::atomic<FewChannelForward> few_channel_forward{FewChannelForward::kAuto};

// Whether a training forward conv runs as TapFoldedConv3d. kAuto folds on CPUs without AVX-512
// when there are at most 8 output channels and at least 16 input channels: D's 32 -> 8 conv at
// batch 64, AVX2, one thread, 1.66 -> 1.12 CPU s for the conv (python3-torch 1.13, the same
// oneDNN), 1.59 -> 0.85 s per call in a 2-thread training step. With 8 input channels (D's
// 8 -> 8) the folded conv is no faster (0.43 against 0.43 s); with AVX-512 it was not measured.
bool UseTapFoldedForward(const at::Tensor& input, const at::Tensor& weight) {
  if (!input.is_cpu() || weight.size(2) == 1 || weight.size(0) > 8) return false;
  switch (few_channel_forward.load(std::memory_order_relaxed)) {
    case FewChannelForward::kDirect:
      return false;
    case FewChannelForward::kTapFolded:
      return true;
    case FewChannelForward::kAuto:
      break;
  }
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return !avx512 && weight.size(1) >= 16;
}

// Stride-1 Conv3d whose gradients avoid oneDNN's slow backward kernels for the few-channel 3D
// convolutions of the 3DGAN: input gradients by the faster of oneDNN's backward-data kernel and a
// forward convolution with the flipped, transposed kernel (UseBackwardDataKernel), weight
// gradients on a padded copy of the input (ConvParameterGradients).
class FastGradConv3d : public torch::autograd::Function<FastGradConv3d> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                            const at::Tensor& weight, const at::Tensor& bias, int64_t px,
                            int64_t py, int64_t pz) {
    ctx->save_for_backward({input, weight});
    ctx->saved_data["px"] = px;
    ctx->saved_data["py"] = py;
    ctx->saved_data["pz"] = pz;
    ctx->saved_data["bias"] = bias.defined();
    if (UseTapFoldedForward(input, weight))
      return TapFoldedConv3d(input, weight, bias, {px, py, pz});
    return at::conv3d(input, weight, bias, {1, 1, 1}, {px, py, pz});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight = saved[1];
    const std::vector<int64_t> pad = {ctx->saved_data["px"].toInt(), ctx->saved_data["py"].toInt(),
                                      ctx->saved_data["pz"].toInt()};
    const bool has_bias = ctx->saved_data["bias"].toBool();
    const at::Tensor grad = grads[0].contiguous();
    at::Tensor grad_input, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) {
      if (UseBackwardDataKernel(weight)) {
        grad_input = std::get<0>(at::convolution_backward(grad, input, weight, c10::nullopt,
                                                          {1, 1, 1}, pad, {1, 1, 1}, false,
                                                          {0, 0, 0}, 1, {true, false, false}));
      } else {
        std::vector<int64_t> full(3);
        for (int i = 0; i < 3; ++i) full[i] = weight.size(2 + i) - 1 - pad[i];
        grad_input = ConvInputGradient(grad, weight, full);
      }
    }
    const bool want_bias = has_bias && ctx->needs_input_grad(2);
    if (ctx->needs_input_grad(1) || want_bias) {
      std::tie(grad_weight, grad_bias) =
          ConvParameterGradients(grad, input, weight, pad, ctx->needs_input_grad(1), want_bias);
    }
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// ReLU whose backward lets a fraction `slope` of the gradient through where the input was <= 0.
// The output is exactly relu(x); only training sees the difference: a cell whose input is
// negative for every event would otherwise get no gradient from any loss and stay empty forever.
class ReluWithLeakyGradient : public torch::autograd::Function<ReluWithLeakyGradient> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            double slope) {
    at::Tensor positive = x.gt(0);
    ctx->save_for_backward({positive});
    ctx->saved_data["slope"] = slope;
    return at::relu(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor positive = ctx->get_saved_variables()[0];
    const double slope = ctx->saved_data["slope"].toDouble();
    return {at::where(positive, grads[0], grads[0] * slope), at::Tensor()};
  }
};

// Philox4x32-10 (at::Philox4_32's rounds and constants) for kPhiloxLanes consecutive counters
// {first + lane, 0, subsequence low, subsequence high} at once; at::Philox4_32 computes one counter
// at a time, with scalar multiplies. numbers[4 * lane + w] is the w-th 32-bit output of counter
// first + lane: what at::Philox4_32(seed, subsequence, 0) returns as its 4 * (first + lane) + w-th
// number. With SSE2 (every x86-64 CPU) four counters share each vector multiply.
constexpr int kPhiloxLanes = 16;
constexpr uint32_t kPhiloxMulA = 0xD2511F53, kPhiloxMulB = 0xCD9E8D57;
constexpr uint32_t kPhiloxKeyA = 0x9E3779B9, kPhiloxKeyB = 0xBB67AE85;

#if defined(__SSE2__)
// Low and high 32-bit halves of a[i] * m for the four lanes of a.
inline void MulHiLo(__m128i a, __m128i m, __m128i& lo, __m128i& hi) {
  const __m128i even = _mm_mul_epu32(a, m);                     // lanes 0, 2 as 64-bit products
  const __m128i odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), m);  // lanes 1, 3
  const __m128i e = _mm_shuffle_epi32(even, _MM_SHUFFLE(3, 1, 2, 0));  // lo0 lo2 hi0 hi2
  const __m128i o = _mm_shuffle_epi32(odd, _MM_SHUFFLE(3, 1, 2, 0));   // lo1 lo3 hi1 hi3
  lo = _mm_unpacklo_epi32(e, o);
  hi = _mm_unpackhi_epi32(e, o);
}

void PhiloxLanes(uint64_t seed, uint64_t subsequence, uint32_t first,
                 uint32_t (&numbers)[4 * kPhiloxLanes]) {
  constexpr int kVectors = kPhiloxLanes / 4;
  __m128i c0[kVectors], c1[kVectors], c2[kVectors], c3[kVectors];
  for (int v = 0; v < kVectors; ++v) {
    const uint32_t base = first + static_cast<uint32_t>(4 * v);
    c0[v] = _mm_setr_epi32(static_cast<int>(base), static_cast<int>(base + 1),
                           static_cast<int>(base + 2), static_cast<int>(base + 3));
    c1[v] = _mm_setzero_si128();
    c2[v] = _mm_set1_epi32(static_cast<int>(static_cast<uint32_t>(subsequence)));
    c3[v] = _mm_set1_epi32(static_cast<int>(static_cast<uint32_t>(subsequence >> 32)));
  }
  const __m128i mul_a = _mm_set1_epi32(static_cast<int>(kPhiloxMulA));
  const __m128i mul_b = _mm_set1_epi32(static_cast<int>(kPhiloxMulB));
  uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m128i k0 = _mm_set1_epi32(static_cast<int>(key0));
    const __m128i k1 = _mm_set1_epi32(static_cast<int>(key1));
    for (int v = 0; v < kVectors; ++v) {
      __m128i lo0, hi0, lo1, hi1;
      MulHiLo(c0[v], mul_a, lo0, hi0);
      MulHiLo(c2[v], mul_b, lo1, hi1);
      c0[v] = _mm_xor_si128(_mm_xor_si128(hi1, c1[v]), k0);
      c2[v] = _mm_xor_si128(_mm_xor_si128(hi0, c3[v]), k1);
      c1[v] = lo1;
      c3[v] = lo0;
    }
    key0 += kPhiloxKeyA;
    key1 += kPhiloxKeyB;
  }
  for (int v = 0; v < kVectors; ++v) {                    // transpose: counter-major order
    const __m128i t0 = _mm_unpacklo_epi32(c0[v], c1[v]);  // a0 b0 a1 b1
    const __m128i t1 = _mm_unpacklo_epi32(c2[v], c3[v]);  // c0 d0 c1 d1
    const __m128i t2 = _mm_unpackhi_epi32(c0[v], c1[v]);  // a2 b2 a3 b3
    const __m128i t3 = _mm_unpackhi_epi32(c2[v], c3[v]);  // c2 d2 c3 d3
    __m128i* out = reinterpret_cast<__m128i*>(numbers + 16 * v);
    _mm_storeu_si128(out, _mm_unpacklo_epi64(t0, t1));
    _mm_storeu_si128(out + 1, _mm_unpackhi_epi64(t0, t1));
    _mm_storeu_si128(out + 2, _mm_unpacklo_epi64(t2, t3));
    _mm_storeu_si128(out + 3, _mm_unpackhi_epi64(t2, t3));
  }
}
#else
void PhiloxLanes(uint64_t seed, uint64_t subsequence, uint32_t first,
                 uint32_t (&numbers)[4 * kPhiloxLanes]) {
  for (int l = 0; l < kPhiloxLanes; ++l) {
    at::Philox4_32 engine(seed, subsequence, first + static_cast<uint32_t>(l));
    for (int w = 0; w < 4; ++w) numbers[4 * l + w] = engine();
  }
}
#endif

}  // namespace

// ATen's bernoulli_ with a scalar probability draws on CPU one element at a time from the
// generator, on one thread (3dgan-25, batch 64: ~220M draws per training step, the largest
// element-wise cost of the step). Here each block of kMaskBlock elements has its own Philox
// stream (seed drawn once from the generator, block index as the subsequence), so blocks fill in
// parallel and the mask does not depend on the thread count. Element i of block b is kept when
// the i-th number of at::Philox4_32(seed, b, 0) is below keep * 2^32; PhiloxLanes computes those
// numbers 16 counters at a time.
at::Tensor ScaledDropoutMask(const at::Tensor& like, double keep,
                             const c10::optional<at::Generator>& generator) {
  TORCH_CHECK(keep > 0 && keep <= 1, "dropout keep probability must be in (0, 1], got ", keep);
  TORCH_CHECK(like.is_cpu(), "ScaledDropoutMask draws CPU masks; got a tensor on ", like.device());
  auto* gen = at::get_generator_or_default<at::CPUGeneratorImpl>(
      generator, at::detail::getDefaultCPUGenerator());
  uint64_t seed = 0;
  {
    std::lock_guard<std::mutex> lock(gen->mutex_);
    seed = gen->random64();
  }
  at::Tensor mask =
      at::empty(like.sizes(), like.options().memory_format(at::MemoryFormat::Contiguous));
  // u < threshold with u uniform on [0, 2^32): probability keep (to 2^-32).
  const double threshold_real = std::ldexp(keep, 32);
  if (threshold_real >= 4294967296.0) return mask.fill_(1.0);  // keep 1: every element kept
  const uint32_t threshold = static_cast<uint32_t>(threshold_real);
  constexpr int64_t kMaskBlock = int64_t{1} << 16;  // a multiple of 4 * kPhiloxLanes
  constexpr int64_t kPerCall = 4 * kPhiloxLanes;    // numbers per PhiloxLanes call
  const int64_t n = mask.numel();
  const int64_t blocks = (n + kMaskBlock - 1) / kMaskBlock;
  AT_DISPATCH_FLOATING_TYPES(mask.scalar_type(), "ScaledDropoutMask", [&] {
    scalar_t* out = mask.data_ptr<scalar_t>();
    const scalar_t kept = static_cast<scalar_t>(1.0 / keep);
    at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
      uint32_t numbers[4 * kPhiloxLanes];
      for (int64_t b = begin; b < end; ++b) {
        const int64_t start = b * kMaskBlock;
        const int64_t stop = std::min(n, start + kMaskBlock);
        for (int64_t chunk = start; chunk < stop; chunk += kPerCall) {
          PhiloxLanes(seed, static_cast<uint64_t>(b), static_cast<uint32_t>((chunk - start) / 4),
                      numbers);
          scalar_t* dst = out + chunk;
          if (stop - chunk >= kPerCall) {  // a constant trip count, which the compiler vectorises
            for (int64_t k = 0; k < kPerCall; ++k) dst[k] = numbers[k] < threshold ? kept : 0;
          } else {
            for (int64_t k = 0; k < stop - chunk; ++k) dst[k] = numbers[k] < threshold ? kept : 0;
          }
        }
      }
    });
  });
  return mask;
}

void SetInputGradientKernel(InputGradientKernel kernel) {
  input_gradient_kernel.store(kernel, std::memory_order_relaxed);
}

void SetFewChannelForward(FewChannelForward kernel) {
  few_channel_forward.store(kernel, std::memory_order_relaxed);
}

namespace {
std::atomic<FewChannelInference> few_channel_inference{FewChannelInference::kAuto};

bool UseTapSum(const at::Tensor& weight) {
  const int64_t taps = weight.size(2) * weight.size(3) * weight.size(4);
  if (weight.size(0) > 2 || taps > 27) return false;
  return few_channel_inference.load(std::memory_order_relaxed) == FewChannelInference::kTapSum;
}
}  // namespace

void SetFewChannelInference(FewChannelInference kernel) {
  few_channel_inference.store(kernel, std::memory_order_relaxed);
}

at::Tensor TapSumConv3d(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                        std::array<int64_t, 3> pad) {
  const int64_t cout = weight.size(0), cin = weight.size(1);
  const int64_t kx = weight.size(2), ky = weight.size(3), kz = weight.size(4);
  // [kx ky kz cout, cin, 1, 1, 1]: channel ((a ky + b) kz + c) cout + o is tap (a, b, c) of
  // output o.
  at::Tensor folded = weight.permute({2, 3, 4, 0, 1}).reshape({kx * ky * kz * cout, cin, 1, 1, 1});
  folded = folded.contiguous(input.suggest_memory_format());
  const at::Tensor padded =
      pad[0] == 0 && pad[1] == 0 && pad[2] == 0
          ? input
          : at::constant_pad_nd(input, {pad[2], pad[2], pad[1], pad[1], pad[0], pad[0]}, 0);
  const at::Tensor per_tap = at::conv3d(padded, folded);
  const int64_t x = padded.size(2) - kx + 1, y = padded.size(3) - ky + 1,
                z = padded.size(4) - kz + 1;
  at::Tensor out;
  int64_t t = 0;
  for (int64_t a = 0; a < kx; ++a) {
    for (int64_t b = 0; b < ky; ++b) {
      for (int64_t c = 0; c < kz; ++c, ++t) {
        const at::Tensor window =
            per_tap.narrow(1, t * cout, cout).narrow(2, a, x).narrow(3, b, y).narrow(4, c, z);
        if (!out.defined()) {
          out = bias.defined() ? window + bias.view({1, cout, 1, 1, 1}) : window.clone();
        } else {
          out.add_(window);
        }
      }
    }
  }
  return out;
}

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
  conv_pad_ = {inner[0], inner[1], inner[2]};
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

torch::Tensor ConvStageImpl::Convolve(const torch::Tensor& x, const torch::Tensor& float_weight,
                                      const torch::Tensor& float_bias, std::array<int64_t, 3> pad) {
  // Parameters stay float32; a bfloat16 input gets bfloat16 copies (small next to the conv).
  const bool cast = x.scalar_type() != float_weight.scalar_type();
  const torch::Tensor weight = cast ? float_weight.to(x.scalar_type()) : float_weight;
  const torch::Tensor bias =
      cast && float_bias.defined() ? float_bias.to(x.scalar_type()) : float_bias;
  // The custom gradients are CPU work (oneDNN's slow few-channel backward); on a GPU cuDNN's own
  // forward and backward run.
  bool fast = x.is_cpu() && bias.defined() && at::GradMode::is_enabled();
  for (int i = 0; i < 3; ++i) fast = fast && pad[i] <= weight.size(2 + i) - 1;
  if (fast) return FastGradConv3d::apply(x, weight, bias, pad[0], pad[1], pad[2]);
  return at::conv3d(x, weight, bias, {1, 1, 1}, {pad[0], pad[1], pad[2]});
}

// Nearest upsampling by integer factors f followed by zero padding and a stride-1 conv equals, for
// each output phase r (output index = f q + r), a conv on the original grid whose taps are sums of
// the original taps that read the same source cell. All phases become the output channels of one
// conv on the small grid, interleaved afterwards: no upsampled copy, and 3-20x fewer
// multiply-adds (3dgan-25: 151M -> 45M and 45M -> 16M per shower; 3dgan-51's first conv 1.8G ->
// 94M). Same function up to float rounding (models_test compares both paths).
PolyphasePlan PlanPolyphase(const ConvStageSpec& spec, const torch::Tensor& conv_weight,
                            const torch::Tensor& conv_bias, std::array<int64_t, 3> in_size) {
  const int64_t cout = spec.out_channels, cin = spec.in_channels;
  PolyphasePlan plan;
  std::array<int64_t, 3>& f = plan.factor;
  std::array<int64_t, 3>& q = plan.phases_size;
  std::array<int64_t, 3>& out = plan.out_size;
  std::array<int64_t, 3> k{};
  std::array<at::Tensor, 3> select;
  std::vector<int64_t>& pad = plan.pad;
  pad.assign(6, 0);
  for (int a = 0; a < 3; ++a) {
    f[a] = static_cast<int64_t>(spec.upsample[a]);
    k[a] = spec.kernel[a];
    const int64_t in = in_size[a];
    const int64_t before = spec.pad[a][0];
    out[a] = in * f[a] + before + spec.pad[a][1] - k[a] + 1;
    q[a] = (out[a] + f[a] - 1) / f[a];
    auto floordiv = [](int64_t n, int64_t d) { return n >= 0 ? n / d : -((-n + d - 1) / d); };
    const int64_t dmin = floordiv(-before, f[a]);
    const int64_t dmax = floordiv(f[a] - 1 + k[a] - 1 - before, f[a]);
    const int64_t taps = dmax - dmin + 1;
    // Filled on the CPU, then on the input's device.
    at::Tensor selection = at::zeros({f[a], taps, k[a]}, at::kFloat);
    auto acc = selection.accessor<float, 3>();
    for (int64_t r = 0; r < f[a]; ++r) {
      for (int64_t j = 0; j < k[a]; ++j) acc[r][floordiv(r + j - before, f[a]) - dmin][j] = 1.0f;
    }
    select[a] = selection.to(conv_weight.device());
    // Input cells dmin .. q-1+dmax are read; pad (or crop, when negative) to exactly that range.
    pad[2 * (2 - a)] = -dmin;
    pad[2 * (2 - a) + 1] = q[a] - 1 + dmax - (in - 1);
  }
  const int64_t phases = f[0] * f[1] * f[2];
  plan.weight =
      at::einsum("oijmn,atj,bum,cvn->oabcituv", {conv_weight, select[0], select[1], select[2]})
          .reshape({cout * phases, cin, select[0].size(1), select[1].size(1), select[2].size(1)});
  if (conv_bias.defined()) {
    // On a GPU as a broadcast: repeat_interleave's backward is an index_add, which the CUDA
    // deterministic mode may refuse; the CPU keeps its bit-for-bit results.
    plan.bias = conv_bias.is_cpu()
                    ? conv_bias.repeat_interleave(phases)
                    : conv_bias.unsqueeze(1).expand({conv_bias.size(0), phases}).reshape({-1});
  }
  return plan;
}

struct ConvStageImpl::InferenceWeights {
  std::vector<std::pair<const void*, int64_t>> sources;  // each parameter's data and version
  at::ScalarType dtype = at::kFloat;
  c10::Device device = c10::Device(c10::kCPU);
  bool channels_last = false;
  std::array<int64_t, 3> in_size{};
  PolyphasePlan plan;              // weight and bias (the conv's own when not upsampling)
  at::Tensor bn_scale, bn_shift;   // bfloat16 BatchNorm, shaped [1, C, 1, 1, 1]
};

std::shared_ptr<const ConvStageImpl::InferenceWeights> ConvStageImpl::InferenceWeightsFor(
    const torch::Tensor& x) {
  std::vector<at::Tensor> parameters = {conv_->weight, conv_->bias};
  const bool bf16_batch_norm = spec_.batch_norm && x.scalar_type() == at::kBFloat16;
  if (bf16_batch_norm) {
    parameters.insert(parameters.end(),
                      {bn_->weight, bn_->bias, bn_->running_mean, bn_->running_var});
  }
  std::vector<std::pair<const void*, int64_t>> sources;
  bool trackable = true;
  for (const at::Tensor& p : parameters) {
    if (!p.defined()) {
      sources.emplace_back(nullptr, 0);
    } else if (p.is_inference()) {
      trackable = false;  // no version counter: derive afresh every time
    } else {
      sources.emplace_back(p.data_ptr(), p._version());
    }
  }
  const std::array<int64_t, 3> in_size = {x.size(2), x.size(3), x.size(4)};
  {
    std::lock_guard<std::mutex> lock(inference_mutex_);
    const InferenceWeights* w = inference_weights_.get();
    if (trackable && w != nullptr && w->sources == sources && w->dtype == x.scalar_type() &&
        w->device == x.device() && w->channels_last == channels_last_ && w->in_size == in_size) {
      return inference_weights_;
    }
  }
  auto w = std::make_shared<InferenceWeights>();
  w->sources = std::move(sources);
  w->dtype = x.scalar_type();
  w->device = x.device();
  w->channels_last = channels_last_;
  w->in_size = in_size;
  if (Polyphased(x)) {
    w->plan = PlanPolyphase(spec_, conv_->weight, conv_->bias, in_size);
  } else {
    w->plan.weight = conv_->weight;
    w->plan.bias = conv_->bias;
  }
  w->plan.weight = w->plan.weight.to(x.scalar_type());
  if (channels_last_) w->plan.weight = w->plan.weight.contiguous(at::MemoryFormat::ChannelsLast3d);
  if (w->plan.bias.defined()) w->plan.bias = w->plan.bias.to(x.scalar_type());
  if (bf16_batch_norm) {
    std::tie(w->bn_scale, w->bn_shift) = Bf16BatchNormScaleShift();
  }
  if (trackable) {
    std::lock_guard<std::mutex> lock(inference_mutex_);
    inference_weights_ = w;
  }
  return w;
}

std::pair<at::Tensor, at::Tensor> ConvStageImpl::Bf16BatchNormScaleShift() const {
  const at::Tensor scale = bn_->weight * at::rsqrt(bn_->running_var + spec_.bn_eps);
  const at::Tensor shift = bn_->bias - bn_->running_mean * scale;
  const std::vector<int64_t> per_channel = {1, spec_.out_channels, 1, 1, 1};
  return {scale.to(at::kBFloat16).view(per_channel), shift.to(at::kBFloat16).view(per_channel)};
}

bool ConvStageImpl::Polyphased(const torch::Tensor& x) const {
  const auto& up = spec_.upsample;
  const bool upsample = up[0] != 1 || up[1] != 1 || up[2] != 1;
  const bool integer_factors = up[0] == static_cast<int64_t>(up[0]) &&
                               up[1] == static_cast<int64_t>(up[1]) &&
                               up[2] == static_cast<int64_t>(up[2]);
  const bool float_or_bf16 = x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16;
  return upsample && polyphase_ && integer_factors && float_or_bf16;
}

torch::Tensor ConvStageImpl::PolyphaseForward(const torch::Tensor& x, const PolyphasePlan& plan) {
  const std::array<int64_t, 3>& f = plan.factor;
  const std::array<int64_t, 3>& q = plan.phases_size;
  const std::array<int64_t, 3>& out = plan.out_size;
  const int64_t cout = spec_.out_channels;
  const int64_t n = x.size(0);
  torch::Tensor y =
      Convolve(at::constant_pad_nd(x, plan.pad, 0), plan.weight, plan.bias, {0, 0, 0});
  // [N, out f0 f1 f2, q0, q1, q2] -> [N, out, q0 f0, q1 f1, q2 f2]: one copy, into the layout the
  // conv's output had (channels-last stays channels-last).
  const torch::Tensor phases =
      y.view({n, cout, f[0], f[1], f[2], q[0], q[1], q[2]}).permute({0, 1, 5, 2, 6, 3, 7, 4});
  const at::MemoryFormat format = y.suggest_memory_format();
  if (format == at::MemoryFormat::ChannelsLast3d) {
    y = at::empty({n, cout, q[0] * f[0], q[1] * f[1], q[2] * f[2]}, y.options().memory_format(format));
    y.view({n, cout, q[0], f[0], q[1], f[1], q[2], f[2]}).copy_(phases);
  } else {
    y = phases.reshape({n, cout, q[0] * f[0], q[1] * f[1], q[2] * f[2]});
  }
  if (q[0] * f[0] != out[0] || q[1] * f[1] != out[1] || q[2] * f[2] != out[2]) {
    y = y.slice(2, 0, out[0]).slice(3, 0, out[1]).slice(4, 0, out[2]).contiguous(format);
  }
  return y;
}

torch::Tensor ConvStageImpl::forward(torch::Tensor x, const c10::optional<at::Generator>& generator,
                                     const torch::Tensor& add_before_activation,
                                     const torch::Tensor& scale_before_add) {
  const auto& up = spec_.upsample;
  const bool upsample = up[0] != 1 || up[1] != 1 || up[2] != 1;
  // Inference reuses what it derives from the parameters; training derives it every pass (the
  // parameters change every step, and autograd must see the derivation).
  const bool inference = !is_training() && !at::GradMode::is_enabled();
  std::shared_ptr<const InferenceWeights> cached;
  if (inference) {
    if (channels_last_) x = x.contiguous(at::MemoryFormat::ChannelsLast3d);
    cached = InferenceWeightsFor(x);
  }
  const torch::Tensor& weight = cached ? cached->plan.weight : conv_->weight;
  const torch::Tensor& bias = cached ? cached->plan.bias : conv_->bias;
  if (Polyphased(x)) {
    x = PolyphaseForward(x, cached ? cached->plan
                                   : PlanPolyphase(spec_, conv_->weight, conv_->bias,
                                                   {x.size(2), x.size(3), x.size(4)}));
  } else {
    if (upsample) {
      std::vector<int64_t> size = {static_cast<int64_t>(x.size(2) * up[0]),
                                   static_cast<int64_t>(x.size(3) * up[1]),
                                   static_cast<int64_t>(x.size(4) * up[2])};
      x = at::upsample_nearest3d(x, size, up[0], up[1], up[2]);
    }
    if (has_extra_pad_) x = at::constant_pad_nd(x, extra_pad_, 0);
    x = inference && UseTapSum(weight) ? TapSumConv3d(x, weight, bias, conv_pad_)
                                       : Convolve(x, weight, bias, conv_pad_);
  }
  if (scale_before_add.defined()) x = x * scale_before_add;
  if (add_before_activation.defined()) x = x + add_before_activation;
  // In place: the conv output is a fresh tensor and both activations support in-place autograd.
  if (spec_.activation == Activation::kLeakyRelu) {
    at::leaky_relu_(x, spec_.leaky_slope);
  } else if (spec_.relu_grad_slope > 0 && is_training() && at::GradMode::is_enabled()) {
    x = ReluWithLeakyGradient::apply(x, spec_.relu_grad_slope);
  } else {
    at::relu_(x);
  }
  if (spec_.batch_norm && x.scalar_type() == at::kBFloat16 && !is_training()) {
    // Inference in bfloat16: the running statistics as one per-channel scale and shift (computed
    // in float32, applied in bfloat16).
    if (cached) {
      x = at::addcmul(cached->bn_shift, x, cached->bn_scale);
    } else {
      const auto [scale, shift] = Bf16BatchNormScaleShift();
      x = at::addcmul(shift, x, scale);
    }
  } else if (spec_.batch_norm) {
    x = cross_rank_sum_ && is_training() ? SyncBatchNorm(x, *bn_, cross_rank_sum_)
                                         : bn_->forward(x);
  }
  if (spec_.dropout > 0 && is_training()) {
    const double keep = 1.0 - spec_.dropout;
    if (x.is_cpu()) {
      x = x * ScaledDropoutMask(x, keep, generator);
    } else {  // ATen's draw on the device (a GPU generator)
      at::Tensor mask = at::empty_like(x).bernoulli_(keep, generator);
      x = x * mask.div_(keep);
    }
  }
  return x;
}

}  // namespace gantry::gan
