// Tests of the 3DGAN networks: parameter counts, shapes, heads, losses, config round trip.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/PhiloxRNGEngine.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "workers/gan/checkpoint.h"
#include "workers/gan/conv_stage.h"
#include "workers/gan/discriminator.h"
#include "workers/gan/generator.h"
#include "workers/gan/losses.h"
#include "jobspec/model_config.h"
#include "workers/gan/preprocessing.h"

namespace gantry::gan {
namespace {

int64_t TrainableParameters(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) {
    if (p.requires_grad()) n += p.numel();
  }
  return n;
}

ModelConfig Preset(const std::string& name) {
  auto c = PresetConfig(name);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(ModelsTest, FixedAngleParameterCountsMatchReference) {
  const ModelConfig c = Preset("3dgan-25");
  // Reference section A: 872,808 for the generator.
  EXPECT_EQ(TrainableParameters(*Generator(c)), 872808);
  // Hand count (docs/MODELS.md): convs 4,032 + 32,008 + 8,008 + 8,008, BN 3 x 16, heads 2 x 10,649.
  EXPECT_EQ(TrainableParameters(*Discriminator(c)), 73402);
}

TEST(ModelsTest, VariableAngleParameterCountsMatchReference) {
  const ModelConfig c = Preset("3dgan-51");
  // Dense 1,332,288; convs 18,440 + 4,614 + 2 x 3,462 + 1,626 + 978 + 48; BN 16 + 4 x 12.
  EXPECT_EQ(TrainableParameters(*Generator(c)), 1364982);
  // Convs 2,896 + 23,048 + 2 x 11,528; BN 3 x 16; heads 2 x 19,153 (19,152 features).
  EXPECT_EQ(TrainableParameters(*Discriminator(c)), 87354);
}

TEST(ModelsTest, FixedAngleShapesAndHeads) {
  const ModelConfig c = Preset("3dgan-25");
  Generator g(c);
  Discriminator d(c);
  g->eval();
  d->eval();
  const at::Tensor energy = at::full({2, 1}, 1.5);
  const at::Tensor input = g->MakeInput(energy, at::Tensor(), at::randn({2, g->noise_dim()}));
  EXPECT_EQ(input.size(1), 200);
  const at::Tensor image = g->forward(input);
  EXPECT_EQ(image.sizes(), (at::IntArrayRef{2, 1, 25, 25, 25}));
  EXPECT_GE(image.min().item<float>(), 0.0f);  // final ReLU
  const DiscriminatorOutput out = d->forward(image);
  EXPECT_EQ(out.real_probability.sizes(), (at::IntArrayRef{2, 1}));
  EXPECT_GE(out.real_probability.min().item<float>(), 0.0f);
  EXPECT_LE(out.real_probability.max().item<float>(), 1.0f);
  EXPECT_EQ(out.energy.sizes(), (at::IntArrayRef{2, 1}));
  EXPECT_FALSE(out.theta.defined());
  // ecal = plain sum of the input image.
  EXPECT_NEAR(out.ecal[1][0].item<float>(), image[1].sum().item<float>(), 1e-3);
}

TEST(ModelsTest, MultiplicativeConditioningScalesLatent) {
  const ModelConfig c = Preset("tiny");
  Generator g(c);
  const at::Tensor noise = at::randn({1, g->noise_dim()});
  const at::Tensor a = g->MakeInput(at::full({1, 1}, 2.0), at::Tensor(), noise);
  EXPECT_TRUE(at::allclose(a, noise * 2.0));
}

TEST(ModelsTest, VariableAngleShapesAndHeads) {
  const ModelConfig c = Preset("3dgan-51");
  Generator g(c);
  Discriminator d(c);
  g->eval();
  d->eval();
  const at::Tensor input =
      g->MakeInput(at::full({1, 1}, 1.0), at::full({1, 1}, 1.2), at::randn({1, g->noise_dim()}));
  EXPECT_EQ(input.size(1), 256);
  EXPECT_FLOAT_EQ(input[0][0].item<float>(), 1.0f);  // concat[E/100, theta, noise]
  EXPECT_FLOAT_EQ(input[0][1].item<float>(), 1.2f);
  const at::Tensor image = g->forward(input);
  EXPECT_EQ(image.sizes(), (at::IntArrayRef{1, 1, 51, 51, 25}));
  const DiscriminatorOutput out = d->forward(image);
  ASSERT_TRUE(out.theta.defined());
  EXPECT_EQ(out.theta.sizes(), (at::IntArrayRef{1, 1}));
  // ecal = sum of image^(1/0.85).
  EXPECT_NEAR(out.ecal.item<float>(), at::pow(image, 1.0 / 0.85).sum().item<float>(),
              1e-3 * std::max(1.0f, out.ecal.item<float>()));
}

// A straight track tilted along x by dx per layer has barycentre angle pi/2 - atan(dx). Layer
// weights grow with depth so that no layer sits exactly at the barycentre depth.
TEST(ModelsTest, BarycentreAngleOfTiltedTrack) {
  double wsum = 0, zsum = 0;
  for (int z = 0; z < 25; ++z) {
    wsum += (z + 1.0) * (z + 1.0);
    zsum += (z + 0.5) * (z + 1.0) * (z + 1.0);
  }
  const double z_ref = zsum / wsum;
  for (double dx : {-0.5, 0.0, 0.4}) {
    at::Tensor image = at::zeros({1, 1, 51, 51, 25});
    for (int z = 0; z < 25; ++z) {
      const double p = 25.0 + dx * (z + 0.5 - z_ref);  // barycentre in cell coordinates
      const int i0 = static_cast<int>(std::floor(p - 0.5));
      const double frac = p - 0.5 - i0;  // split between two cells so the barycentre is exact
      image[0][0][i0][25][z] = (1.0 - frac) * (z + 1.0) * (z + 1.0);
      image[0][0][i0 + 1][25][z] = frac * (z + 1.0) * (z + 1.0);
    }
    const double theta = BarycentreAngle(image).item<double>();
    EXPECT_NEAR(theta, M_PI / 2 - std::atan(dx), 1e-4) << "dx " << dx;
  }
  EXPECT_FLOAT_EQ(BarycentreAngle(at::zeros({1, 1, 51, 51, 25})).item<float>(), 100.0f);
}

TEST(ModelsTest, BarycentreAngleHasFiniteGradients) {
  at::Tensor image = at::rand({2, 1, 51, 51, 25});
  image[1].zero_();  // an empty image must not poison the gradient with NaN
  image.set_requires_grad(true);
  BarycentreAngle(image).sum().backward();
  EXPECT_TRUE(at::isfinite(image.grad()).all().item<bool>());
}

// The stage's conv computes its input gradient with a forward conv (FastGradConv3d); it must
// agree with ATen's own backward.
TEST(ModelsTest, ConvStageGradientsMatchAten) {
  ConvStageSpec spec;
  spec.in_channels = 3;
  spec.out_channels = 2;
  spec.kernel = {5, 4, 3};
  spec.pad = {{{2, 2}, {1, 2}, {0, 0}}};
  ConvStage stage(spec);
  auto named = stage->named_parameters();
  const at::Tensor w = named["conv.weight"], b = named["conv.bias"];
  const at::Tensor x = at::randn({2, 3, 9, 8, 7}).set_requires_grad(true);
  const at::Tensor probe = at::randn({2, 2, 9, 8, 5});
  (stage->forward(x) * probe).sum().backward();
  const at::Tensor gx = x.grad().clone(), gw = w.grad().clone(), gb = b.grad().clone();
  x.grad().zero_();
  w.grad().zero_();
  b.grad().zero_();
  const at::Tensor padded = at::constant_pad_nd(x, {0, 0, 1, 2, 2, 2}, 0);
  (at::leaky_relu(at::conv3d(padded, w, b), 0.3) * probe).sum().backward();
  // Float32 sums of ~700 products: an element-wise tolerance fails on entries that cancel to
  // near zero, so each gradient is compared against its own largest magnitude.
  const auto expect_close = [](const at::Tensor& fast, const at::Tensor& aten, const char* what) {
    const double scale = aten.abs().max().item<double>();
    EXPECT_LE((fast - aten).abs().max().item<double>(), 1e-4 * scale) << what;
  };
  expect_close(gx, x.grad(), "input gradient");
  expect_close(gw, w.grad(), "weight gradient");
  expect_close(gb, b.grad(), "bias gradient");
}

// One conv stage case of the float64 gradient tests below: channels, kernel, padding, input shape.
struct ConvGradientCase {
  int64_t in, out;
  std::array<int64_t, 3> kernel;
  std::array<std::array<int64_t, 2>, 3> pad;
  std::vector<int64_t> input;
};

// For one random input and output probe, in float64 (or `dtype`): the ConvStage's output and its
// input, weight and bias gradients, then the same four from ATen's literal pad -> conv3d -> leaky
// ReLU.
struct StageAndAten {
  at::Tensor out, gx, gw, gb;      // the stage
  at::Tensor literal, lx, lw, lb;  // ATen
};
StageAndAten ConvStageAgainstAten(const ConvGradientCase& c, at::ScalarType dtype = at::kDouble) {
  ConvStageSpec spec;
  spec.in_channels = c.in;
  spec.out_channels = c.out;
  spec.kernel = c.kernel;
  spec.pad = c.pad;
  ConvStage stage(spec);
  stage->to(dtype);
  auto named = stage->named_parameters();
  const at::Tensor w = named["conv.weight"], b = named["conv.bias"];
  const at::Tensor x = at::randn(c.input, dtype).set_requires_grad(true);
  StageAndAten r;
  r.out = stage->forward(x);
  const at::Tensor probe = at::randn(r.out.sizes(), dtype);
  (r.out * probe).sum().backward();
  r.gx = x.grad().clone();
  r.gw = w.grad().clone();
  r.gb = b.grad().clone();
  x.grad().zero_();
  w.grad().zero_();
  b.grad().zero_();
  const std::vector<int64_t> pad = {c.pad[2][0], c.pad[2][1], c.pad[1][0],
                                    c.pad[1][1], c.pad[0][0], c.pad[0][1]};
  r.literal = at::leaky_relu(at::conv3d(at::constant_pad_nd(x, pad, 0), w, b), spec.leaky_slope);
  EXPECT_EQ(r.literal.sizes(), r.out.sizes());
  (r.literal * probe).sum().backward();
  r.lx = x.grad();
  r.lw = w.grad();
  r.lb = b.grad();
  return r;
}

// The few-channel gradient kernels (1-channel input gradient by z taps, few-channel weight
// gradients as a forward conv) compute exactly ATen's conv gradients: float64, to 1e-12, on the
// discriminator's shapes (1 -> 4 "same", 8 -> 8 and 32 -> 8 with symmetric padding 2 and 1, 8 ->
// 3).
TEST(ModelsTest, FewChannelConvGradientsMatchAtenInFloat64) {
  const std::vector<ConvGradientCase> cases = {
      {1, 4, {5, 5, 5}, ConvStageSpec::Same({5, 5, 5}), {3, 1, 9, 8, 7}},
      {1, 3, {5, 4, 3}, {{{2, 2}, {1, 2}, {1, 1}}}, {2, 1, 7, 6, 9}},
      {8, 8, {5, 5, 5}, ConvStageSpec::Symmetric(2, 2, 2), {3, 8, 7, 7, 7}},
      {8, 8, {5, 5, 5}, ConvStageSpec::Symmetric(1, 1, 1), {2, 8, 7, 6, 8}},
      {8, 3, {3, 4, 5}, ConvStageSpec::Symmetric(1, 1, 2), {2, 8, 6, 7, 8}},
      // The discriminator's 32 -> 8 conv: its weight gradient is a forward conv too.
      {32, 8, {5, 5, 5}, ConvStageSpec::Symmetric(2, 2, 2), {3, 32, 7, 6, 8}},
      {32, 8, {5, 5, 5}, ConvStageSpec::Symmetric(1, 1, 1), {3, 32, 7, 6, 8}},
  };
  for (const ConvGradientCase& c : cases) {
    const StageAndAten r = ConvStageAgainstAten(c);
    const std::string what = "case " + std::to_string(c.in) + " -> " + std::to_string(c.out);
    EXPECT_TRUE(at::allclose(r.out, r.literal, 1e-12, 1e-12)) << what;
    EXPECT_TRUE(at::allclose(r.gx, r.lx, 1e-12, 1e-12)) << what;
    EXPECT_TRUE(at::allclose(r.gw, r.lw, 1e-12, 1e-12)) << what;
    EXPECT_TRUE(at::allclose(r.gb, r.lb, 1e-12, 1e-12)) << what;
  }
}

// Both input-gradient kernels (oneDNN's backward-data, picked on CPUs without AVX-512, and the
// forward conv with the flipped kernel, picked with AVX-512) and the weight gradients on a padded
// copy compute ATen's conv gradients: float64, each gradient within 1e-12 of its own largest
// magnitude, on the discriminator's and generator's shapes.
TEST(ModelsTest, ConvGradientKernelsMatchAtenInFloat64) {
  const std::vector<ConvGradientCase> cases = {
      {1, 4, {5, 5, 5}, ConvStageSpec::Same({5, 5, 5}), {3, 1, 9, 8, 7}},
      {32, 8, {5, 5, 5}, ConvStageSpec::Symmetric(2, 2, 2), {3, 32, 7, 6, 8}},
      {8, 8, {5, 5, 5}, ConvStageSpec::Symmetric(2, 2, 2), {3, 8, 7, 7, 7}},
      {8, 8, {5, 5, 5}, ConvStageSpec::Symmetric(1, 1, 1), {2, 8, 7, 6, 8}},
      {8, 16, {6, 6, 8}, ConvStageSpec::Same({6, 6, 8}), {2, 8, 7, 7, 8}},
      {6, 6, {3, 3, 8}, {{{1, 1}, {0, 0}, {3, 3}}}, {2, 6, 6, 5, 4}},
  };
  const auto expect_close = [](const at::Tensor& got, const at::Tensor& aten,
                               const std::string& what) {
    const double scale = aten.abs().max().item<double>();
    EXPECT_LE((got - aten).abs().max().item<double>(), 1e-12 * scale) << what;
  };
  for (const InputGradientKernel kernel :
       {InputGradientKernel::kBackwardData, InputGradientKernel::kForwardConv}) {
    SetInputGradientKernel(kernel);
    for (const ConvGradientCase& c : cases) {
      const StageAndAten r = ConvStageAgainstAten(c);
      const std::string what =
          absl::StrCat(kernel == InputGradientKernel::kBackwardData ? "backward-data" : "forward",
                       " kernel, ", c.in, " -> ", c.out);
      expect_close(r.out, r.literal, what + " value");
      expect_close(r.gx, r.lx, what + " input gradient");
      expect_close(r.gw, r.lw, what + " weight gradient");
      expect_close(r.gb, r.lb, what + " bias gradient");
    }
  }
  SetInputGradientKernel(InputGradientKernel::kAuto);
}

// The few-output-channel forward conv with its x taps folded into output channels
// (kTapFolded, what kAuto runs for D's 32 -> 8 conv) and the direct conv compute ATen's conv and
// its gradients: float64, each within 1e-12 of its own largest magnitude, on D's shapes and on
// kernels, paddings and channel counts that exercise every index of the fold (x padding 0, 1, 2,
// asymmetric "same" padding, kx 1 to 5, one output channel); float32 (oneDNN's kernels) within
// 1e-5 on D's 32 -> 8 shape.
TEST(ModelsTest, TapFoldedForwardMatchesAtenInFloat64) {
  const std::vector<ConvGradientCase> cases = {
      {32, 8, {5, 5, 5}, ConvStageSpec::Symmetric(2, 2, 2), {3, 32, 7, 6, 8}},
      {32, 8, {5, 5, 5}, ConvStageSpec::Symmetric(1, 1, 1), {2, 32, 7, 6, 8}},
      {8, 8, {5, 5, 5}, ConvStageSpec::Symmetric(2, 2, 2), {3, 8, 7, 7, 7}},
      {16, 3, {3, 4, 5}, ConvStageSpec::Same({3, 4, 5}), {2, 16, 6, 7, 8}},
      {4, 1, {4, 3, 2}, {{{0, 0}, {1, 1}, {0, 1}}}, {2, 4, 9, 5, 6}},
      {5, 2, {2, 3, 3}, ConvStageSpec::Symmetric(1, 0, 2), {1, 5, 3, 4, 4}},
      {3, 2, {1, 3, 3}, ConvStageSpec::Symmetric(0, 1, 1), {2, 3, 4, 4, 4}},
  };
  const auto expect_close = [](const at::Tensor& got, const at::Tensor& aten, double tolerance,
                               const std::string& what) {
    const double scale = aten.abs().max().item<double>();
    EXPECT_GT(scale, 0) << what;
    EXPECT_LE((got - aten).abs().max().item<double>(), tolerance * scale) << what;
  };
  for (const FewChannelForward kernel :
       {FewChannelForward::kTapFolded, FewChannelForward::kDirect}) {
    SetFewChannelForward(kernel);
    const std::string name = kernel == FewChannelForward::kTapFolded ? "folded" : "direct";
    for (const ConvGradientCase& c : cases) {
      const StageAndAten r = ConvStageAgainstAten(c);
      const std::string what = absl::StrCat(name, " forward, ", c.in, " -> ", c.out, " kernel ",
                                            c.kernel[0], "x", c.kernel[1], "x", c.kernel[2]);
      ASSERT_EQ(r.out.sizes(), r.literal.sizes()) << what;
      expect_close(r.out, r.literal, 1e-12, what + " value");
      expect_close(r.gx, r.lx, 1e-12, what + " input gradient");
      expect_close(r.gw, r.lw, 1e-12, what + " weight gradient");
      expect_close(r.gb, r.lb, 1e-12, what + " bias gradient");
    }
    const StageAndAten f = ConvStageAgainstAten(cases[0], at::kFloat);
    expect_close(f.out, f.literal, 1e-5, name + " forward, float32 value");
    expect_close(f.gx, f.lx, 1e-5, name + " forward, float32 input gradient");
  }
  SetFewChannelForward(FewChannelForward::kAuto);
}

// The dropout mask: values 0 or 1 / keep, the kept fraction within 5 standard deviations of
// keep, the same mask from the same generator state at 1 and 2 threads, a new mask per draw.
TEST(ModelsTest, ScaledDropoutMaskKeepsTheRateAndIsReproducible) {
  const at::Tensor like = at::empty({3, 8, 25, 25, 25}, at::kDouble);  // several Philox blocks
  const double keep = 0.8;
  const int threads = at::get_num_threads();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  at::set_num_threads(1);
  const at::Tensor one_thread = ScaledDropoutMask(like, keep, gen);
  const at::Tensor next = ScaledDropoutMask(like, keep, gen);
  gen.set_current_seed(7);
  at::set_num_threads(2);
  const at::Tensor two_threads = ScaledDropoutMask(like, keep, gen);
  at::set_num_threads(threads);
  EXPECT_EQ(one_thread.sizes(), like.sizes());
  EXPECT_EQ(one_thread.scalar_type(), at::kDouble);
  EXPECT_TRUE(at::equal(one_thread, two_threads));
  EXPECT_FALSE(at::equal(one_thread, next));
  const at::Tensor kept = one_thread.ne(0);
  EXPECT_TRUE(at::logical_or(kept.logical_not(), one_thread.eq(1.0 / keep)).all().item<bool>());
  const double n = static_cast<double>(like.numel());
  const double fraction = kept.sum().item<double>() / n;
  EXPECT_NEAR(fraction, keep, 5 * std::sqrt(keep * (1 - keep) / n));
  // Each Philox block on its own keeps the rate too (no block left constant).
  const at::Tensor per_block = kept.flatten()
                                   .slice(0, 0, (like.numel() / 65536) * 65536)
                                   .view({-1, 65536})
                                   .to(at::kDouble)
                                   .mean(1);
  EXPECT_LT((per_block - keep).abs().max().item<double>(),
            5 * std::sqrt(keep * (1 - keep) / 65536));
  EXPECT_TRUE(ScaledDropoutMask(at::empty({4, 4}), 1.0, gen).eq(1).all().item<bool>());
  EXPECT_THROW(ScaledDropoutMask(like, 0.0, gen), c10::Error);
}

// The mask is exactly ATen's Philox4x32-10 stream per block: element i of block b is kept when
// the i-th number of at::Philox4_32(seed, b, 0) is below keep * 2^32, seed being the generator's
// next random64 (several blocks and a partial one, float32 and float64).
TEST(ModelsTest, ScaledDropoutMaskFollowsAtenPhilox) {
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const at::Tensor like = at::empty({2, 3, 131, 173}, dtype);  // 2 full blocks and a part
    const double keep = 0.7;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
    const at::Tensor mask = ScaledDropoutMask(like, keep, gen).flatten().to(at::kDouble);
    gen.set_current_seed(11);
    const uint64_t seed = gen.get<at::CPUGeneratorImpl>()->random64();
    const uint64_t threshold = static_cast<uint64_t>(std::ldexp(keep, 32));
    const int64_t n = like.numel();
    at::Tensor expected = at::empty({n}, at::kDouble);
    auto e = expected.accessor<double, 1>();
    for (int64_t b = 0; b * 65536 < n; ++b) {
      at::Philox4_32 engine(seed, static_cast<uint64_t>(b), 0);
      for (int64_t i = b * 65536; i < std::min(n, (b + 1) * 65536); ++i) {
        e[i] = static_cast<uint64_t>(engine()) < threshold ? 1.0 / keep : 0.0;
      }
    }
    EXPECT_TRUE(at::allclose(mask, expected, 1e-6, 0)) << at::toString(dtype);
    EXPECT_TRUE(at::equal(mask.ne(0), expected.ne(0))) << at::toString(dtype);
  }
}

// Upsampling stages run as one polyphase conv; it must compute the literal upsample -> pad ->
// conv, values and weight gradients.
TEST(ModelsTest, PolyphaseUpsampleConvMatchesLiteralPath) {
  struct Case {
    ModelConfig config;
    size_t stage;
    std::vector<int64_t> input;
  };
  const std::vector<Case> cases = {
      {Preset("3dgan-25"), 1, {2, 64, 7, 7, 8}},
      {Preset("3dgan-25"), 2, {2, 6, 13, 14, 9}},
      {Preset("3dgan-51"), 0, {1, 8, 9, 9, 8}},
  };
  for (const Case& c : cases) {
    ConvStage stage(GeneratorStages(c.config)[c.stage]);
    stage->eval();
    const at::Tensor x = at::randn(c.input);
    const at::Tensor fast = stage->forward(x);
    (fast * fast).sum().backward();
    const at::Tensor grad_fast = stage->named_parameters()["conv.weight"].grad().clone();
    stage->zero_grad();
    stage->set_polyphase(false);
    const at::Tensor literal = stage->forward(x);
    (literal * literal).sum().backward();
    const at::Tensor grad_literal = stage->named_parameters()["conv.weight"].grad();
    ASSERT_EQ(fast.sizes(), literal.sizes()) << "stage " << c.stage;
    EXPECT_TRUE(at::allclose(fast, literal, 1e-4, 1e-4)) << "stage " << c.stage;
    const double scale = grad_literal.abs().max().item<double>();
    EXPECT_LE((grad_fast - grad_literal).abs().max().item<double>(), 1e-4 * scale)
        << "stage " << c.stage;
  }
}

// Inference (eval mode, no autograd) keeps what it derives from the parameters (the polyphase
// plan, weights in bfloat16, BatchNorm as scale and shift) and derives it again when a parameter
// changes: its results equal the uncached path's (autograd on) bit for bit, before and after.
TEST(ModelsTest, InferenceReusesDerivedWeightsUntilAParameterChanges) {
  const ModelConfig config = Preset("3dgan-25");
  torch::manual_seed(3);
  Generator g(config);
  g->eval();
  const at::Tensor input = at::randn({3, config.latent});
  auto cached = [&](at::ScalarType dtype) {
    at::NoGradGuard no_grad;
    return g->forward(input.to(dtype)).to(at::kFloat);
  };
  auto uncached = [&](at::ScalarType dtype) {  // autograd on: derived afresh
    return g->forward(input.to(dtype)).detach().to(at::kFloat);
  };
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(dtype == at::kFloat ? "float32" : "bfloat16");
    const at::Tensor first = cached(dtype);
    EXPECT_TRUE(at::equal(first, cached(dtype)));
    EXPECT_TRUE(at::equal(first, uncached(dtype)));
    {
      at::NoGradGuard no_grad;
      g->stages()[1]->named_parameters()["conv.weight"].mul_(1.5);  // an upsampling stage
      g->stages()[0]->named_buffers()["bn.running_var"].mul_(2.0);
    }
    const at::Tensor changed = cached(dtype);
    EXPECT_FALSE(at::equal(first, changed));
    EXPECT_TRUE(at::equal(changed, uncached(dtype)));
  }
}

// An untrained generator in eval mode, seeded, whose output for `input` is not all zero (an
// untrained 3dgan-51 can end below its final ReLU everywhere: then its last conv is flipped).
Generator EvalGeneratorWithShowers(const ModelConfig& config, uint64_t seed,
                                   const at::Tensor& input) {
  torch::manual_seed(seed);
  Generator g(config);
  g->eval();
  at::NoGradGuard no_grad;
  if (g->forward(input).max().item<double>() == 0) {
    g->stages().back()->named_parameters()["conv.weight"].neg_();
  }
  return g;
}

// Channels-last inference is the same function as the default layout up to float rounding, for
// both architectures, in float32 and bfloat16; the output's shape does not change.
TEST(ModelsTest, ChannelsLastInferenceMatchesTheDefaultLayout) {
  for (const std::string preset : {"3dgan-25", "3dgan-51"}) {
    const ModelConfig config = Preset(preset);
    at::NoGradGuard no_grad;
    const at::Tensor input = at::rand({2, config.latent});
    Generator g = EvalGeneratorWithShowers(config, 5, input);
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      SCOPED_TRACE(preset + (dtype == at::kFloat ? " float32" : " bfloat16"));
      g->set_channels_last(false);
      const at::Tensor plain = g->forward(input.to(dtype)).to(at::kFloat);
      g->set_channels_last(true);
      const at::Tensor last = g->forward(input.to(dtype)).to(at::kFloat);
      ASSERT_EQ(plain.sizes(), last.sizes());
      const double scale = plain.abs().max().item<double>();
      ASSERT_GT(scale, 0);
      EXPECT_LE((plain - last).abs().max().item<double>(),
                (dtype == at::kFloat ? 1e-5 : 5e-2) * scale);
    }
    g->set_channels_last(false);
  }
}

// TapSumConv3d is a conv3d: against ATen's in float64 for one and two output channels, with and
// without padding or bias, and in float32 on a channels-last input.
TEST(ModelsTest, TapSumConvMatchesAtenInFloat64) {
  struct Case {
    int64_t cin, cout;
    std::array<int64_t, 3> kernel, pad;
  };
  const std::vector<Case> cases = {
      {4, 1, {2, 2, 2}, {0, 0, 0}}, {6, 2, {3, 3, 3}, {1, 1, 0}}, {1, 1, {2, 3, 1}, {0, 1, 0}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.cin, " -> ", c.cout, " channels, kernel ", c.kernel[0],
                              c.kernel[1], c.kernel[2]));
    const at::Tensor x = at::randn({2, c.cin, 7, 6, 5}, at::kDouble);
    const at::Tensor w = at::randn({c.cout, c.cin, c.kernel[0], c.kernel[1], c.kernel[2]},
                                   at::kDouble);
    const at::Tensor b = at::randn({c.cout}, at::kDouble);
    for (const at::Tensor& bias : {b, at::Tensor()}) {
      const at::Tensor reference = at::conv3d(x, w, bias, {1, 1, 1}, {c.pad[0], c.pad[1], c.pad[2]});
      const at::Tensor tap_sum = TapSumConv3d(x, w, bias, c.pad);
      ASSERT_EQ(tap_sum.sizes(), reference.sizes());
      EXPECT_LE((tap_sum - reference).abs().max().item<double>(),
                1e-12 * reference.abs().max().item<double>());
    }
    const at::Tensor x32 = x.to(at::kFloat).contiguous(at::MemoryFormat::ChannelsLast3d);
    const at::Tensor reference =
        at::conv3d(x32, w.to(at::kFloat), b.to(at::kFloat), {1, 1, 1}, {c.pad[0], c.pad[1], c.pad[2]});
    const at::Tensor tap_sum = TapSumConv3d(x32, w.to(at::kFloat), b.to(at::kFloat), c.pad);
    EXPECT_LE((tap_sum - reference).abs().max().item<double>(),
              1e-5 * reference.abs().max().item<double>());
  }
}

// The generators' one-channel last stages in inference run as TapSumConv3d when asked: the same
// showers up to float rounding, in both layouts.
TEST(ModelsTest, TapSumLastStageMatchesTheDirectConv) {
  for (const std::string preset : {"3dgan-25", "3dgan-51"}) {
    const ModelConfig config = Preset(preset);
    at::NoGradGuard no_grad;
    const at::Tensor input = at::rand({2, config.latent});
    Generator g = EvalGeneratorWithShowers(config, 7, input);
    for (bool channels_last : {false, true}) {
      SCOPED_TRACE(preset + (channels_last ? " channels-last" : " NCDHW"));
      g->set_channels_last(channels_last);
      SetFewChannelInference(FewChannelInference::kDirect);
      const at::Tensor direct = g->forward(input);
      SetFewChannelInference(FewChannelInference::kTapSum);
      const at::Tensor tap_sum = g->forward(input);
      SetFewChannelInference(FewChannelInference::kAuto);
      ASSERT_EQ(direct.sizes(), tap_sum.sizes());
      const double scale = direct.abs().max().item<double>();
      ASSERT_GT(scale, 0);
      EXPECT_LE((direct - tap_sum).abs().max().item<double>(), 1e-5 * scale);
    }
    g->set_channels_last(false);
  }
}

TEST(ModelsTest, LossesFollowKeras) {
  // MAPE divides by the label, not the prediction.
  EXPECT_NEAR(
      MeanAbsolutePercentageError(at::full({2, 1}, 1.0), at::full({2, 1}, 2.0)).item<float>(), 50.0,
      1e-4);
  EXPECT_NEAR(MeanAbsolutePercentageError(at::zeros({3, 1}), at::full({3, 1}, 7.0)).item<float>(),
              100.0, 1e-4);
  // BCE clips the probability at 1e-7: log(1e-7) = -16.118.
  EXPECT_NEAR(BinaryCrossEntropy(at::zeros({1, 1}), at::ones({1, 1})).item<float>(), 16.118, 1e-3);
  EXPECT_NEAR(MeanAbsoluteError(at::full({2, 1}, 1.0), at::full({2, 1}, 1.5)).item<float>(), 0.5,
              1e-6);
}

TEST(ModelsTest, WeightedHeadLosses) {
  const ModelConfig c = Preset("3dgan-25");
  DiscriminatorOutput out;
  out.real_probability = at::full({1, 1}, 0.5);
  out.energy = at::full({1, 1}, 1.0);
  out.ecal = at::full({1, 1}, 150.0);
  HeadLabels labels;
  labels.real = at::ones({1, 1});
  labels.energy100 = at::full({1, 1}, 2.0);
  labels.ecal = at::full({1, 1}, 200.0);
  const LossTerms t = HeadLosses(c, out, labels);
  ASSERT_EQ(t.parts.size(), 3u);
  EXPECT_NEAR(t.total.item<float>(), 2.0 * std::log(2.0) + 0.1 * 50.0 + 0.1 * 25.0, 1e-4);
}

// Two showers at 150 and 250 against targets 200 and 200: per shower the MAPE is (25 + 25) / 2 =
// 25; on the batch means (200 against 200) it is 0, and the config round-trips the flag.
TEST(ModelsTest, EcalLossOnTheBatchMean) {
  ModelConfig c = Preset("3dgan-25");
  DiscriminatorOutput out;
  out.real_probability = at::full({2, 1}, 0.5);
  out.energy = at::full({2, 1}, 2.0);
  out.ecal = at::tensor({150.0f, 250.0f}).view({2, 1});
  HeadLabels labels;
  labels.real = at::ones({2, 1});
  labels.energy100 = at::full({2, 1}, 2.0);
  labels.ecal = at::full({2, 1}, 200.0);
  EXPECT_NEAR(HeadLosses(c, out, labels).parts[2].item<float>(), 25.0, 1e-4);
  c.ecal_loss_batch_mean = true;
  EXPECT_NEAR(HeadLosses(c, out, labels).parts[2].item<float>(), 0.0, 1e-4);
  out.ecal = at::tensor({150.0f, 150.0f}).view({2, 1});
  EXPECT_NEAR(HeadLosses(c, out, labels).parts[2].item<float>(), 25.0, 1e-4);
  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->ecal_loss_batch_mean);
  auto set = OverrideModelConfig(Preset("3dgan-25"), "ecal_loss_batch_mean=1");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->ecal_loss_batch_mean);
}

// The distribution form: generated ratios {0.75, 1.25} (totals 150 and 250 against 200) against
// a real batch whose sorted ratios are {0.9, 1.1} score 100 x (0.15 + 0.15) / 2 = 15 whatever the
// generated showers' order, and 0 against a real batch of the same ratios; each total's gradient
// is 100 / (2 x 200) times the sign of its own quantile's difference. Without the reference (the
// discriminator's updates) the loss is the batch mean's; the flag round-trips and excludes the
// batch-mean form.
TEST(ModelsTest, EcalLossOnTheSortedRatiosComparesTheSpreadWithTheRealBatch) {
  ModelConfig c = Preset("3dgan-25");
  c.ecal_loss_quantiles = true;
  DiscriminatorOutput out;
  out.real_probability = at::full({2, 1}, 0.5);
  out.energy = at::full({2, 1}, 2.0);
  out.ecal = at::tensor({250.0f, 150.0f}).view({2, 1}).set_requires_grad(true);
  HeadLabels labels;
  labels.real = at::ones({2, 1});
  labels.energy100 = at::full({2, 1}, 2.0);
  labels.ecal = at::full({2, 1}, 200.0);
  EXPECT_NEAR(HeadLosses(c, out, labels).parts[2].item<float>(), 0.0, 1e-4) << "batch mean";

  labels.ecal_reference = EcalReference(at::tensor({220.0f, 180.0f}).view({2, 1}),
                                        at::full({2, 1}, 200.0));
  EXPECT_NEAR(labels.ecal_reference[0].item<float>(), 0.9, 1e-6);
  const at::Tensor loss = HeadLosses(c, out, labels).parts[2];
  EXPECT_NEAR(loss.item<float>(), 15.0, 1e-4);
  loss.backward();
  EXPECT_NEAR(out.ecal.grad()[0].item<float>(), 0.25, 1e-6) << "250 sits above the real 1.1";
  EXPECT_NEAR(out.ecal.grad()[1].item<float>(), -0.25, 1e-6) << "150 sits below the real 0.9";
  labels.ecal_reference = EcalReference(at::tensor({150.0f, 250.0f}).view({2, 1}),
                                        at::full({2, 1}, 200.0));
  EXPECT_NEAR(HeadLosses(c, out, labels).parts[2].item<float>(), 0.0, 1e-4);

  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->ecal_loss_quantiles);
  auto both = OverrideModelConfig(Preset("tiny-spots"), "ecal_loss_quantiles=1");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("set one of them"), std::string::npos) << both.status();
  auto set =
      OverrideModelConfig(Preset("tiny-spots"), "ecal_loss_batch_mean=0;ecal_loss_quantiles=1");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->ecal_loss_quantiles);
}

// Spot sampling: each cell of the drawn shower is a whole number of spots (s = 0.002 GeV x 100 =
// 0.2 in preprocessed units) around the expected energy 0.5, so the cells average 0.5 (variance
// s mu = 0.1 per cell over 31,250 cells: a standard error of 0.0018), about exp(-2.5) = 8.2% of them
// are empty, and the gradient reaches the expected energies whole. The same seed draws the same
// shower; without spots the expected shower is returned as it is.
TEST(ModelsTest, SpotSamplingDrawsAroundTheExpectedShowerAndPassesTheGradientThrough) {
  ModelConfig c = Preset("tiny-template");
  c.generator_spots = true;
  c.generator_spot_gev = 0.002;
  Generator g(c);
  const at::Tensor expected = at::full({2, 1, 25, 25, 25}, 0.5f).requires_grad_();
  at::Generator rng = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Tensor drawn = g->DrawSpotsStraightThrough(expected, rng);
  const at::Tensor spots = drawn.detach() / 0.2;
  EXPECT_TRUE(at::allclose(spots, at::round(spots), 0, 1e-4));
  EXPECT_NEAR(drawn.mean().item<double>(), 0.5, 4 * 0.0018);
  EXPECT_NEAR(drawn.eq(0).to(at::kDouble).mean().item<double>(), std::exp(-2.5), 0.01);
  drawn.sum().backward();
  EXPECT_TRUE(at::equal(expected.grad(), at::ones_like(expected)));
  at::Generator same = at::make_generator<at::CPUGeneratorImpl>(7);
  EXPECT_TRUE(at::equal(g->DrawSpotsStraightThrough(expected, same), drawn));
  c.generator_spots = false;
  c.generator_spot_gev = 0;
  Generator plain(c);
  EXPECT_TRUE(plain->DrawSpotsStraightThrough(expected, rng).is_same(expected));
}

// With a spot shape a = 1 each spot deposits an exponential energy of mean s = 0.2: the cells keep
// their mean 0.5 (variance s mu (1 + 1/a) = 0.2 per cell over 31,250 cells: a standard error of
// 0.0025) and their empty fraction exp(-2.5), their variance doubles against whole spots (0.2
// against 0.1), and hardly any cell is a whole number of spots. The gradient still passes
// straight through; the shape is refused without spots and outside [0, 100].
TEST(ModelsTest, ASpotShapeDrawsContinuousCellsWithTheSameMean) {
  ModelConfig c = Preset("tiny-template");
  c.generator_spots = true;
  c.generator_spot_gev = 0.002;
  c.generator_spot_shape = 1;
  Generator g(c);
  const at::Tensor expected = at::full({2, 1, 25, 25, 25}, 0.5f).requires_grad_();
  at::Generator rng = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Tensor drawn = g->DrawSpotsStraightThrough(expected, rng);
  const at::Tensor d = drawn.detach().to(at::kDouble);
  EXPECT_NEAR(d.mean().item<double>(), 0.5, 4 * 0.0025);
  EXPECT_NEAR(d.var().item<double>(), 0.2, 0.02);
  EXPECT_NEAR(d.eq(0).to(at::kDouble).mean().item<double>(), std::exp(-2.5), 0.01);
  const at::Tensor spots = d / 0.2;
  const double whole = (spots - at::round(spots)).abs().lt(1e-3).logical_and(d.gt(0))
                           .to(at::kDouble).sum().item<double>() /
                       d.gt(0).to(at::kDouble).sum().item<double>();
  EXPECT_LT(whole, 0.01) << "cells of whole spots";
  drawn.sum().backward();
  EXPECT_TRUE(at::equal(expected.grad(), at::ones_like(expected)));
  at::Generator same = at::make_generator<at::CPUGeneratorImpl>(7);
  EXPECT_TRUE(at::equal(g->DrawSpotsStraightThrough(expected, same), drawn));

  EXPECT_TRUE(ValidateModelConfig(c).ok()) << ValidateModelConfig(c);
  c.generator_spot_shape = -1;
  EXPECT_FALSE(ValidateModelConfig(c).ok());
  c.generator_spot_shape = 1;
  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->generator_spot_shape, 1);
  auto no_spots = OverrideModelConfig(Preset("tiny-template"), "generator_spot_shape=1");
  ASSERT_FALSE(no_spots.ok());
  EXPECT_NE(no_spots.status().message().find("needs generator_spots"), std::string::npos);
}

TEST(ModelsTest, EcalTargetPolynomial) {
  const ModelConfig c = Preset("3dgan-25");
  // E = 100 GeV: ratio = 0.0018 - 0.023 + 0.11 - 0.28 + 2.21 = 2.0188; target = 2.0188 * 1 * 100.
  EXPECT_NEAR(EcalTarget(c, at::ones({1, 1})).item<float>(), 201.88, 1e-3);
  // E = 200 GeV: 0.0018*16 - 0.023*8 + 0.11*4 - 0.28*2 + 2.21 = 1.9348; x 2 x 100.
  EXPECT_NEAR(EcalTarget(c, at::full({1, 1}, 2.0)).item<float>(), 386.96, 1e-2);
}

TEST(ModelsTest, PreprocessingFixedAngle) {
  const ModelConfig c = Preset("3dgan-25");
  showers::ShowerSet set;
  set.cells.assign(2 * 25 * 25 * 25, 0.0f);
  set.cells[5] = 0.5f;   // 0.5 GeV -> 50
  set.cells[6] = 1e-9f;  // x100 = 1e-7 < 1e-6 -> 0
  set.energy_gev = {120.0f, 30.0f};
  auto t = PreprocessShowers(c, set);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FLOAT_EQ(t->images.flatten()[5].item<float>(), 50.0f);
  EXPECT_FLOAT_EQ(t->images.flatten()[6].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(t->energy100[0][0].item<float>(), 1.2f);
  EXPECT_FLOAT_EQ(t->ecal[0][0].item<float>(), 50.0f);
  // And back to GeV.
  const at::Tensor gev = UndoCellPreprocessing(c, t->images);
  EXPECT_EQ(gev.sizes(), (at::IntArrayRef{2, 25, 25, 25}));
  EXPECT_FLOAT_EQ(gev.flatten()[5].item<float>(), 0.5f);
}

TEST(ModelsTest, PreprocessingVariableAngleAndErrors) {
  const ModelConfig c = Preset("3dgan-51");
  showers::ShowerSet set;
  set.layout = showers::Layout::kVariableAngle3DGan;
  set.shape = {51, 51, 25};
  set.cells.assign(2 * 51 * 51 * 25, 0.0f);
  set.cells[10] = 2.0f;
  set.energy_gev = {100.0f, 50.0f};  // the second event is empty and is dropped
  set.theta_rad = {1.5f, 1.2f};
  auto t = PreprocessShowers(c, set);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->images.size(0), 1);
  EXPECT_EQ(t->dropped_events, 1);
  EXPECT_NEAR(t->images.flatten()[10].item<float>(), std::pow(2.0, 0.85), 1e-5);
  EXPECT_FLOAT_EQ(t->ecal[0][0].item<float>(), 2.0f);  // linear GeV sum
  EXPECT_FLOAT_EQ(t->theta[0][0].item<float>(), 1.5f);
  set.theta_rad.clear();
  EXPECT_EQ(PreprocessShowers(c, set).status().code(), absl::StatusCode::kInvalidArgument);
  // 51-grid data for the 25^3 model.
  EXPECT_EQ(PreprocessShowers(Preset("3dgan-25"), set).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModelsTest, ConfigRoundTripAndValidation) {
  for (const std::string& name : PresetNames()) {
    const ModelConfig c = Preset(name);
    EXPECT_TRUE(ValidateModelConfig(c).ok()) << name;
    auto back = ParseModelConfig(SerializeModelConfig(c));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(SerializeModelConfig(*back), SerializeModelConfig(c));
  }
  EXPECT_EQ(PresetConfig("3dgan-99").status().code(), absl::StatusCode::kNotFound);
  ModelConfig bad = Preset("3dgan-25");
  bad.loss_weights = {1.0};
  EXPECT_EQ(ValidateModelConfig(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseModelConfig("preset=x\n").status().code(), absl::StatusCode::kInvalidArgument);
}

// The optional log input of the discriminator (ModelConfig::discriminator_log_scale), in float64:
// s * log(1 + x / s) and its gradient 1 / (1 + x / s), finite at empty cells; 0 is the identity;
// the ecal head still sums the linear image.
TEST(ModelsTest, DiscriminatorLogInputInFloat64) {
  const std::vector<double> cells = {0.0, 1e-6, 0.01, 0.5, 1.0, 3.0, 50.0, 400.0};
  for (double s : {0.1, 1.0, 10.0}) {
    at::Tensor x = at::tensor(cells, at::kDouble).set_requires_grad(true);
    const at::Tensor y = DiscriminatorInput(x, s);
    y.sum().backward();
    for (size_t i = 0; i < cells.size(); ++i) {
      const double want = s * std::log1p(cells[i] / s);
      EXPECT_NEAR(y[i].item<double>(), want, 1e-14 * std::max(1.0, want)) << "s " << s;
      EXPECT_NEAR(x.grad()[i].item<double>(), 1.0 / (1.0 + cells[i] / s), 1e-14) << "s " << s;
    }
    // Below s the input stays nearly linear; far above it is compressed.
    EXPECT_NEAR(DiscriminatorInput(at::full({1}, 1e-3 * s, at::kDouble), s).item<double>(),
                1e-3 * s, 1e-6 * s);
    EXPECT_LT(DiscriminatorInput(at::full({1}, 50.0 * s, at::kDouble), s).item<double>(), 4.0 * s);
  }
  const at::Tensor x = at::rand({3, 4}, at::kDouble);
  EXPECT_TRUE(at::equal(DiscriminatorInput(x, 0.0), x));

  ModelConfig c = Preset("tiny");
  c.discriminator_log_scale = 1.0;
  Discriminator d(c);
  d->eval();
  at::Tensor image = at::rand({2, 1, 25, 25, 25}) * 50.0;
  image[1].zero_();
  image.set_requires_grad(true);
  const DiscriminatorOutput out = d->forward(image);
  EXPECT_NEAR(out.ecal[0][0].item<float>(), image[0].sum().item<float>(),
              1e-5 * image[0].sum().item<float>());
  EXPECT_EQ(out.ecal[1][0].item<float>(), 0.0f);
  out.real_probability.sum().backward();
  EXPECT_TRUE(at::isfinite(image.grad()).all().item<bool>());
}

// ShowerFeatures in float64 on showers whose moments are known: a layer with two cells of 1 and 3
// GeV at x offsets -1 and +3 from the grid's centre (centroid 2, width sqrt(3)), a layer of one
// cell (width 0.01), empty layers (fraction, centroid 0, width 0.01); log E, log total, log
// sampling fraction. An empty shower's features and gradients are finite.
TEST(ModelsTest, ShowerFeaturesOfKnownShowersInFloat64) {
  const ModelConfig c = Preset("tiny");  // 25^3, cells x 100, E / 100
  ASSERT_EQ(ShowerFeatureCount(c), 3 + 5 * 25);
  at::Tensor img = at::zeros({2, 1, 25, 25, 25}, at::kDouble);
  const double s = c.cell_scale;
  img[0][0][11][12][4] = 1.0 * s;  // x offset -1 in layer 4
  img[0][0][15][12][4] = 3.0 * s;  // x offset +3
  img[0][0][12][20][9] = 4.0 * s;  // y offset +8 in layer 9
  const at::Tensor e100 = at::tensor({0.5, 2.0}, at::kDouble).view({2, 1});
  img.set_requires_grad(true);
  const at::Tensor f = ShowerFeatures(img, e100, c);
  ASSERT_EQ(f.sizes(), (std::vector<int64_t>{2, 3 + 5 * 25}));
  const int64_t z = 25;
  auto at_ = [&](int64_t row, int64_t col) { return f[row][col].item<double>(); };
  EXPECT_NEAR(at_(0, 0), std::log(50.0), 1e-12);
  EXPECT_NEAR(at_(0, 1), std::log(8.0 + 1e-3), 1e-12);
  EXPECT_NEAR(at_(0, 2), std::log(8.0 / 50.0 + 1e-6), 1e-12);
  const int64_t frac = 3, cx = 3 + z, cy = 3 + 2 * z, wx = 3 + 3 * z, wy = 3 + 4 * z;
  EXPECT_NEAR(at_(0, frac + 4), 0.5, 1e-6);
  EXPECT_NEAR(at_(0, frac + 9), 0.5, 1e-6);
  EXPECT_EQ(at_(0, frac + 0), 0.0);
  EXPECT_NEAR(at_(0, cx + 4), 2.0, 1e-6);
  EXPECT_NEAR(at_(0, wx + 4), std::sqrt(3.0 + 1e-4), 1e-6);
  EXPECT_NEAR(at_(0, cy + 4), 0.0, 1e-12);
  EXPECT_NEAR(at_(0, wy + 4), 0.01, 1e-6);
  EXPECT_NEAR(at_(0, cy + 9), 8.0, 1e-6);
  EXPECT_NEAR(at_(0, cx + 9), -0.0, 1e-6);
  EXPECT_EQ(at_(0, cx + 0), 0.0);
  EXPECT_NEAR(at_(0, wx + 0), 0.01, 1e-12);
  // The empty shower: finite everywhere, its gradient too.
  EXPECT_TRUE(at::isfinite(f).all().item<bool>());
  EXPECT_NEAR(at_(1, 1), std::log(1e-3), 1e-12);
  f.sum().backward();
  EXPECT_TRUE(at::isfinite(img.grad()).all().item<bool>());
}

// The discriminator's feature head: its parameters are (features + 1) x H + 2H + 1 on top of the
// conv discriminator's; it needs E; and it reads the batch: in eval mode (running BatchNorm
// statistics, no dropout) a shower's output depends on the other showers of its batch only with the
// head. The option is an integer in [0, 512], off in every preset and in configs written before it.
TEST(ModelsTest, DiscriminatorFeatureHead) {
  ModelConfig c = Preset("tiny");
  EXPECT_EQ(c.discriminator_feature_units, 0);
  const int64_t plain = TrainableParameters(*Discriminator(c));
  c.discriminator_feature_units = 16;
  Discriminator d(c);
  EXPECT_EQ(TrainableParameters(*d), plain + (ShowerFeatureCount(c) + 1) * 16 + 2 * 16 + 1);
  d->eval();
  at::Tensor batch = at::rand({3, 1, 25, 25, 25}) * 10.0;
  const at::Tensor e100 = at::full({3, 1}, 0.5);
  EXPECT_THROW(d->forward(batch), c10::Error);
  const at::Tensor first = d->forward(batch, e100).real_probability[0].clone();
  batch[1].mul_(3.0);
  batch[2].zero_();
  const at::Tensor again = d->forward(batch, e100).real_probability[0];
  EXPECT_FALSE(at::allclose(first, again, 0.0, 1e-7)) << first << again;
  ModelConfig off = Preset("tiny");
  Discriminator reference(off);
  reference->eval();
  const at::Tensor alone = reference->forward(batch.slice(0, 0, 1)).real_probability[0];
  EXPECT_TRUE(at::allclose(alone, reference->forward(batch).real_probability[0], 1e-5, 1e-7));

  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->discriminator_feature_units, 16);
  std::string old = SerializeModelConfig(off);
  const size_t at = old.find("discriminator_feature_units=");
  ASSERT_NE(at, std::string::npos);
  old.erase(at, old.find('\n', at) - at + 1);
  auto parsed = ParseModelConfig(old);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->discriminator_feature_units, 0);
  auto overridden = OverrideModelConfig(off, "discriminator_feature_units=32");
  ASSERT_TRUE(overridden.ok()) << overridden.status();
  EXPECT_EQ(overridden->discriminator_feature_units, 32);
  for (int64_t bad : {int64_t{-1}, kMaxFeatureUnits + 1}) {
    c.discriminator_feature_units = bad;
    const absl::Status s = ValidateModelConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("discriminator_feature_units"), std::string::npos) << s;
  }
}

// The optional leaky gradient of the generator's output ReLU (generator_relu_grad_slope), in
// float64: the output is exactly relu(x) in every mode; in training with autograd the gradient is
// 1 where x > 0 and the slope elsewhere; in eval mode, or with slope 0, it is the exact ReLU's.
TEST(ModelsTest, GeneratorOutputReluLeakyGradientInFloat64) {
  const std::vector<double> inputs = {-3.0, -1e-9, 0.0, 1e-9, 0.5, 7.0};
  auto run = [&inputs](double slope, bool training) {
    ConvStageSpec spec;
    spec.kernel = {1, 1, 1};
    spec.bias = false;
    spec.activation = Activation::kRelu;
    spec.relu_grad_slope = slope;
    ConvStage stage(spec);
    stage->to(at::kDouble);
    {
      torch::NoGradGuard no_grad;
      stage->named_parameters()["conv.weight"].fill_(1.0);
    }
    stage->train(training);
    at::Tensor x = at::tensor(inputs, at::kDouble).view({1, 1, 1, 1, -1}).set_requires_grad(true);
    const at::Tensor y = stage->forward(x);
    EXPECT_TRUE(at::equal(y, at::relu(x.detach()))) << "slope " << slope;
    (y * 2.0).sum().backward();
    return x.grad().flatten();
  };
  const at::Tensor leaky = run(0.1, true);
  const at::Tensor eval = run(0.1, false);
  const at::Tensor exact = run(0.0, true);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const double want = inputs[i] > 0 ? 2.0 : 0.2;
    EXPECT_DOUBLE_EQ(leaky[i].item<double>(), want) << inputs[i];
    EXPECT_DOUBLE_EQ(eval[i].item<double>(), inputs[i] > 0 ? 2.0 : 0.0) << inputs[i];
    EXPECT_DOUBLE_EQ(exact[i].item<double>(), inputs[i] > 0 ? 2.0 : 0.0) << inputs[i];
  }
  // Only the generator's output stage carries it, in both topologies.
  for (const char* name : {"tiny", "3dgan-25", "3dgan-51"}) {
    ModelConfig c = Preset(name);
    c.generator_relu_grad_slope = 0.05;
    const std::vector<ConvStageSpec> stages = GeneratorStages(c);
    for (size_t i = 0; i + 1 < stages.size(); ++i) EXPECT_EQ(stages[i].relu_grad_slope, 0.0);
    EXPECT_EQ(stages.back().relu_grad_slope, 0.05) << name;
  }
}

// An optional number of ModelConfig that is 0 (off) by default: it round-trips through the stored
// text, a config written before it existed reads as 0, --model-set overrides it, and
// ValidateModelConfig refuses each of `bad` with a message naming it.
void ExpectOptionalConfigNumber(const std::string& key, double ModelConfig::*field, double good,
                                const std::vector<double>& bad) {
  ModelConfig c = Preset("tiny");
  EXPECT_EQ(c.*field, 0.0) << key;
  c.*field = good;
  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back).*field, good) << key;
  std::string old = SerializeModelConfig(Preset("tiny"));
  const size_t at = old.find(key + "=");
  ASSERT_NE(at, std::string::npos) << key;
  old.erase(at, old.find('\n', at) - at + 1);
  auto parsed = ParseModelConfig(old);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ((*parsed).*field, 0.0) << key;
  auto overridden = OverrideModelConfig(Preset("tiny"), absl::StrCat(key, "=", good));
  ASSERT_TRUE(overridden.ok()) << overridden.status();
  EXPECT_EQ((*overridden).*field, good) << key;
  for (double value : bad) {
    c.*field = value;
    const absl::Status s = ValidateModelConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key << " " << value;
    EXPECT_NE(s.message().find(key), std::string::npos) << s;
  }
}

TEST(ModelsTest, GeneratorReluGradSlopeConfig) {
  ExpectOptionalConfigNumber("generator_relu_grad_slope", &ModelConfig::generator_relu_grad_slope,
                             0.05, {-0.1, std::nan(""), 1.5});
}

TEST(ModelsTest, DiscriminatorLogScaleConfig) {
  ExpectOptionalConfigNumber("discriminator_log_scale", &ModelConfig::discriminator_log_scale, 2.5,
                             {-1.0, std::nan(""), 1e9});
}

// generator_template: off by default, round-trips, reads as off from configs written before it,
// and --model-set turns it on; "2" is refused.
TEST(ModelsTest, GeneratorTemplateConfig) {
  // tiny-template: tiny's networks with latent 128 (dense 112 x 1,568 more) and (2 + 2 modes) x
  // 25^3 template values; the discriminator is tiny's.
  EXPECT_EQ(TrainableParameters(*Generator(Preset("tiny-template"))), 44776 + 175616 + 4 * 15625);
  EXPECT_EQ(TrainableParameters(*Discriminator(Preset("tiny-template"))), 46378);
  ModelConfig c = Preset("tiny");
  EXPECT_FALSE(c.generator_template);
  c.generator_template = true;
  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->generator_template);
  std::string old = SerializeModelConfig(c);
  const size_t at = old.find("generator_template=");
  ASSERT_NE(at, std::string::npos);
  old.erase(at, old.find('\n', at) - at + 1);
  auto parsed = ParseModelConfig(old);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->generator_template);
  auto on = OverrideModelConfig(Preset("tiny"), "generator_template=1");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->generator_template);
  const auto bad = OverrideModelConfig(Preset("tiny"), "generator_template=2");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("generator_template"), std::string::npos) << bad.status();

  // template_modes: round-trips, reads as 0 from configs written before it, needs the template
  // and at most the noise width (and kMaxTemplateModes) of modes.
  EXPECT_EQ(Preset("tiny").template_modes, 0);
  EXPECT_EQ(Preset("tiny-template").template_modes, 2);
  EXPECT_EQ(Preset("tiny-template").profile_loss_weight, 0.4);
  c.template_modes = 5;
  back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->template_modes, 5);
  old = SerializeModelConfig(c);
  const size_t modes_at = old.find("template_modes=");
  ASSERT_NE(modes_at, std::string::npos);
  old.replace(modes_at, old.find('\n', modes_at) - modes_at, "template_modes=x");
  EXPECT_EQ(ParseModelConfig(old).status().code(), absl::StatusCode::kInvalidArgument);
  old.erase(modes_at, old.find('\n', modes_at) - modes_at + 1);
  parsed = ParseModelConfig(old);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->template_modes, 0);
  auto refused = [](const std::string& set, const std::string& fragment) {
    const auto r = OverrideModelConfig(Preset("tiny"), set);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << set;
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status();
  };
  refused("template_modes=2", "needs generator_template=1");
  refused("generator_template=1;template_modes=17", "noise width");  // tiny: latent 16
  refused("generator_template=1;latent=128;template_modes=65", "template_modes must be in [0, 64]");
  refused("generator_template=1;template_modes=-1", "template_modes must be in [0, 64]");
}

// profile_loss_weight and profile_fit: round-trip, read as 0 and empty from configs written
// before them, and each refusal names the field and what to change.
TEST(ModelsTest, ProfileLossConfig) {
  ModelConfig c = Preset("tiny");
  EXPECT_EQ(c.profile_loss_weight, 0.0);
  EXPECT_TRUE(c.profile_fit.empty());
  EXPECT_EQ(c.profile_slices(), 75);
  c.profile_loss_weight = 0.25;
  c.profile_fit.assign(150, 0.0);
  for (size_t i = 0; i < c.profile_fit.size(); ++i) c.profile_fit[i] = 0.1 * i - 3.3;
  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->profile_loss_weight, 0.25);
  EXPECT_EQ(back->profile_fit, c.profile_fit);  // %.17g round-trips exactly
  std::string old = SerializeModelConfig(c);
  for (const char* key : {"profile_loss_weight=", "profile_fit="}) {
    const size_t at = old.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    old.erase(at, old.find('\n', at) - at + 1);
  }
  auto parsed = ParseModelConfig(old);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->profile_loss_weight, 0.0);
  EXPECT_TRUE(parsed->profile_fit.empty());
  // A fresh training fits the profile with the conditions.
  auto on = OverrideModelConfig(Preset("tiny"), "profile_loss_weight=0.5");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->profile_loss_weight, 0.5);
  EXPECT_TRUE(on->fit_conditions_to_data);
  auto refused = [](const std::string& set, const std::string& fragment) {
    const auto r = OverrideModelConfig(Preset("tiny"), set);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << set;
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status();
  };
  refused("profile_loss_weight=-1", "profile_loss_weight must be in [0, 1000]");
  refused("profile_loss_weight=nan", "profile_loss_weight must be in [0, 1000]");
  refused("profile_loss_weight=1;fit_conditions_to_data=0", "set fit_conditions_to_data=1");
  refused("profile_fit=1,2,3", "profile_fit needs 2 x (x + y + z) = 150 values");
  refused("profile_fit=1,2,x", "bad profile_fit");
  std::string infinite = "profile_fit=inf";
  for (int i = 1; i < 150; ++i) infinite += ",0";
  refused(infinite, "profile_fit values must be finite");
  // 3dgan-51: 51 + 51 + 25 slices.
  EXPECT_EQ(Preset("3dgan-51").profile_slices(), 127);
}

// The profile loss in float64 against its formula: the value is 100 sum_i |G_i - F_i| / sum_i F_i
// over the 75 slices of a tiny grid. The gradient with respect to a cell of shower n in slices
// (i, j, k) is 100 (s_i + s_j + s_k) N / (2 N_h e_n sum F), s the sign of G - F over the other
// half h' of the batch (even rows against odd rows), N_h the showers in n's half. With two ranks
// (the other rank's sums added by cross_rank_sum) the value is the global batch's and the
// gradient twice this rank's share, which the data-parallel hook's average halves.
TEST(ModelsTest, ProfileLossInFloat64) {
  ModelConfig c = Preset("tiny");
  const int64_t slices = c.profile_slices();
  at::manual_seed(7);
  c.profile_fit.resize(2 * slices);
  const at::Tensor a = at::rand({slices}, at::kDouble) + 0.5;
  const at::Tensor b = at::rand({slices}, at::kDouble) * 0.2 - 0.1;
  for (int64_t i = 0; i < slices; ++i) {
    c.profile_fit[i] = a[i].item<double>();
    c.profile_fit[slices + i] = b[i].item<double>();
  }
  const int64_t n = 3;
  const at::Tensor energy100 = at::tensor({0.2, 1.0, 1.9}, at::kDouble).view({n, 1});
  // Cells of about the fitted size, some exactly 0.
  at::Tensor cells = at::relu(at::rand({n, 1, 25, 25, 25}, at::kDouble) * 0.004 - 0.0005) *
                     energy100.view({n, 1, 1, 1, 1});
  cells.requires_grad_(true);
  const ProfileLossTerm t = ProfileLoss(c, cells, energy100, 0, 1, nullptr);
  t.loss.backward();
  // By hand: per shower slice sums per unit e and fitted profiles (n, 75).
  const at::Tensor per_e = cells.detach().squeeze(1) / energy100.view({n, 1, 1, 1});
  const at::Tensor g = at::cat({per_e.sum({2, 3}), per_e.sum({1, 3}), per_e.sum({1, 2})}, 1);
  const at::Tensor f = a.unsqueeze(0) + at::log(energy100) * b.unsqueeze(0);
  const double f_total = f.sum().item<double>();
  const double want = 100.0 * (g.sum(0) - f.sum(0)).abs().sum().item<double>() / f_total;
  EXPECT_NEAR(t.value.item<double>(), want, 1e-12 * want);
  EXPECT_NEAR(t.loss.item<double>(), want, 1e-12 * want);
  EXPECT_GT(want, 1.0);  // not vacuous: the profiles differ
  // Rows 0 and 2 are half A, row 1 half B.
  const at::Tensor sign_a = ((g[0] + g[2] - f[0] - f[2]) / 2.0).sign();  // A's, given to B
  const at::Tensor sign_b = (g[1] - f[1]).sign();                        // B's, given to A
  auto expected = [&](int64_t row) {
    const at::Tensor s = row == 1 ? sign_a : sign_b;
    const double half = row == 1 ? 1.0 : 2.0;
    return 100.0 * 3.0 / (2.0 * half * f_total) *
           (s.slice(0, 0, 25).view({25, 1, 1}) + s.slice(0, 25, 50).view({1, 25, 1}) +
            s.slice(0, 50).view({1, 1, 25})) /
           energy100[row].item<double>();
  };
  for (int64_t row = 0; row < n; ++row) {
    const at::Tensor want_grad = expected(row);
    EXPECT_LE((cells.grad()[row][0] - want_grad).abs().max().item<double>(),
              1e-12 * want_grad.abs().max().item<double>())
        << "row " << row;
  }
  // The two halves' signs differ somewhere: the test tells them apart.
  EXPECT_FALSE(at::equal(sign_a, sign_b));

  // Two ranks: this rank's rows 0-2 and another rank's rows 3-5, whose sums cross_rank_sum adds.
  const at::Tensor other_cells = cells.detach().flip(0) * 1.3;
  const at::Tensor other_e = energy100.flip(0) * 0.9;
  at::Tensor recorded;
  ProfileLoss(c, other_cells, other_e, 3, 2,
              [&](at::Tensor& totals) { recorded = totals.clone(); });
  ASSERT_TRUE(recorded.defined());
  int calls = 0;
  cells.mutable_grad() = at::Tensor();
  const ProfileLossTerm ranked = ProfileLoss(c, cells, energy100, 0, 2, [&](at::Tensor& totals) {
    ++calls;
    totals.add_(recorded);
  });
  ranked.loss.backward();
  EXPECT_EQ(calls, 1);
  // The global batch of 6 rows in one process.
  at::Tensor global_cells = at::cat({cells.detach(), other_cells}).requires_grad_(true);
  const ProfileLossTerm global =
      ProfileLoss(c, global_cells, at::cat({energy100, other_e}), 0, 1, nullptr);
  global.loss.backward();
  EXPECT_NEAR(ranked.value.item<double>(), global.value.item<double>(),
              1e-12 * global.value.item<double>());
  EXPECT_LE((cells.grad() - 2.0 * global_cells.grad().slice(0, 0, n)).abs().max().item<double>(),
            1e-12 * global_cells.grad().abs().max().item<double>());
  // One shower in the whole batch: its own sign.
  at::Tensor one = cells.detach().slice(0, 0, 1).clone().requires_grad_(true);
  ProfileLoss(c, one, energy100.slice(0, 0, 1), 0, 1, nullptr).loss.backward();
  const at::Tensor own = (g[0] - f[0]).sign();
  const at::Tensor want_one =
      100.0 / f[0].sum() *
      (own.slice(0, 0, 25).view({25, 1, 1}) + own.slice(0, 25, 50).view({1, 25, 1}) +
       own.slice(0, 50).view({1, 1, 25})) /
      energy100[0].item<double>();
  EXPECT_LE((one.grad()[0][0] - want_one).abs().max().item<double>(),
            1e-12 * want_one.abs().max().item<double>());
}

// The shower template, in float64: with the output conv's weights at 0 the generator's output is
// exactly relu(e (a + b ln e + z_1 M_1 + z_2 M_2 + z_3 M_3)), e = E/100, z the noise, for both
// topologies; the fixed-angle input carries e as an extra last column; the loss's gradient reaches
// a, b and M_k as the sums over events of e, e ln e and e z_k where the output is positive.
// SetShowerTemplate refuses another size, a non-finite value and a model without a template.
TEST(ModelsTest, GeneratorShowerTemplateInFloat64) {
  for (const char* name : {"tiny", "3dgan-51"}) {
    ModelConfig c = Preset(name);
    c.generator_template = true;
    c.template_modes = 3;
    if (c.variable_angle()) {  // narrow, to keep float64 fast; the template path is the same
      c.latent = 8;
      c.dense_channels = 2;
      c.generator_filters = {2, 2, 2, 2, 2, 2};
    }
    Generator g(c);
    g->to(at::kDouble);
    g->train();
    const int64_t cells = c.grid[0] * c.grid[1] * c.grid[2];
    const int64_t rows = 2 + c.template_modes;
    std::vector<double> values(static_cast<size_t>(rows * cells));
    for (int64_t i = 0; i < rows * cells; ++i) values[i] = std::sin(0.37 * static_cast<double>(i));
    ASSERT_TRUE(g->SetShowerTemplate(values).ok()) << name;
    {
      torch::NoGradGuard no_grad;
      const std::string last = absl::StrCat("stage", GeneratorStages(c).size() - 1, ".conv.weight");
      g->named_parameters()[last].zero_();
    }
    const at::Tensor energy100 = at::tensor({0.5, 2.0}, at::kDouble).view({2, 1});
    const at::Tensor theta = at::full({2, 1}, 1.2, at::kDouble);
    const at::Tensor noise = at::randn({2, g->noise_dim()}, at::kDouble);
    const at::Tensor input = g->MakeInput(energy100, theta, noise);
    EXPECT_EQ(input.size(1), c.variable_angle() ? c.latent : c.latent + 1) << name;
    const at::Tensor t =
        at::tensor(values, at::kDouble).view({rows, c.grid[0], c.grid[1], c.grid[2]});
    const at::Tensor e = energy100.view({2, 1, 1, 1, 1});
    at::Tensor pre = e * (t[0] + at::log(e) * t[1]);
    for (int64_t k = 0; k < c.template_modes; ++k) {  // e z_k M_k, z_k the k-th noise column
      pre = pre + e * noise.select(1, k).view({2, 1, 1, 1, 1}) * t[2 + k];
    }
    const at::Tensor out = g->forward(input);
    EXPECT_TRUE(at::allclose(out, at::relu(pre), 0, 1e-12)) << name;
    out.sum().backward();
    const at::Tensor positive = pre.gt(0).to(at::kDouble);
    const at::Tensor want_a = (positive * e).sum(0);
    const at::Tensor want_b = (positive * e * at::log(e)).sum(0);
    const at::Tensor grad = g->shower_template().grad();
    EXPECT_TRUE(at::allclose(grad[0], want_a[0], 0, 1e-12)) << name;
    EXPECT_TRUE(at::allclose(grad[1], want_b[0], 0, 1e-12)) << name;
    for (int64_t k = 0; k < c.template_modes; ++k) {
      const at::Tensor want_mode = (positive * e * noise.select(1, k).view({2, 1, 1, 1, 1})).sum(0);
      EXPECT_TRUE(at::allclose(grad[2 + k], want_mode[0], 0, 1e-12)) << name << " mode " << k;
    }

    EXPECT_EQ(g->SetShowerTemplate(std::vector<double>(10, 1.0)).code(),
              absl::StatusCode::kInvalidArgument);
    values[3] = std::nan("");
    EXPECT_EQ(g->SetShowerTemplate(values).code(), absl::StatusCode::kInvalidArgument);
  }
  Generator plain(Preset("tiny"));
  EXPECT_FALSE(plain->shower_template().defined());
  EXPECT_EQ(plain->SetShowerTemplate({1.0}).code(), absl::StatusCode::kFailedPrecondition);
}

// A fresh tiny-template model: the template is 0 until the data sets it, and the output conv starts
// template_residual_init (0.01) times the reference's initialisation (same seed, same draws); at 0
// the output conv is all zeros, the other stages as before.
TEST(ModelsTest, FreshTemplateModelStartsWithASmallResidual) {
  auto plain = NewTrainingState(Preset("tiny"), 5);
  ModelConfig c = Preset("tiny");
  c.generator_template = true;
  auto with_template = NewTrainingState(c, 5);
  ASSERT_TRUE(plain.ok() && with_template.ok());
  EXPECT_TRUE(at::equal(with_template->generator->shower_template(),
                        at::zeros_like(with_template->generator->shower_template())));
  const std::string last = absl::StrCat("stage", GeneratorStages(c).size() - 1, ".conv.weight");
  const at::Tensor a = plain->generator->named_parameters()[last];
  const at::Tensor b = with_template->generator->named_parameters()[last];
  EXPECT_TRUE(at::allclose(b, a * 0.01, 1e-6, 0));
  const std::string first = "stage0.conv.weight";
  EXPECT_TRUE(at::equal(plain->generator->named_parameters()[first],
                        with_template->generator->named_parameters()[first]));
  c.template_residual_init = 0;
  auto zero = NewTrainingState(c, 5);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_TRUE(at::equal(zero->generator->named_parameters()[last], at::zeros_like(a)));
  EXPECT_TRUE(at::equal(zero->generator->named_parameters()[first],
                        plain->generator->named_parameters()[first]));
  EXPECT_FALSE(OverrideModelConfig(Preset("tiny"), "template_residual_init=0").ok());
}

// template_relative_residual: the conv stack's output r is multiplied by the mean template T = e
// (a + b ln e) before it is added, relu(T + T r): where T is 0 the shower is 0 whatever the
// network, and where T = 10 the deviation from T is 10 times the additive model's, relu(T + r), of
// the same weights. It needs a template, and round-trips.
TEST(ModelsTest, RelativeResidualScalesTheNetworkByTheMeanTemplate) {
  ModelConfig c = Preset("tiny-template");
  c.template_modes = 0;
  auto additive = NewTrainingState(c, 5);
  c.template_relative_residual = true;
  auto relative = NewTrainingState(c, 5);
  ASSERT_TRUE(additive.ok() && relative.ok());
  std::vector<double> values(2 * 15625, 0.0);
  for (int64_t cell = 0; cell < 15625; cell += 2) values[cell] = 10.0;  // a; b = 0
  ASSERT_TRUE(additive->generator->SetShowerTemplate(values).ok());
  ASSERT_TRUE(relative->generator->SetShowerTemplate(values).ok());
  additive->generator->eval();
  relative->generator->eval();
  torch::NoGradGuard no_grad;
  at::Generator rng = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor noise = at::randn({2, c.noise_dim()}, rng, at::kFloat);
  const at::Tensor input = relative->generator->MakeInput(at::ones({2, 1}), at::Tensor(), noise);
  const at::Tensor a = additive->generator->forward(input).reshape({2, -1});
  const at::Tensor r = relative->generator->forward(input).reshape({2, -1});
  const at::Tensor odd = at::arange(1, 15625, 2);
  const at::Tensor even = at::arange(0, 15625, 2);
  EXPECT_TRUE(at::equal(r.index_select(1, odd), at::zeros({2, odd.size(0)})));
  EXPECT_GT(a.index_select(1, odd).gt(0).sum().item<int64_t>(), 0);  // the additive haze
  const at::Tensor deviation = a.index_select(1, even) - 10.0;
  EXPECT_GT(deviation.abs().max().item<float>(), 1e-4);
  EXPECT_TRUE(at::allclose(r.index_select(1, even) - 10.0, 10.0 * deviation, 1e-3, 1e-4));
  ModelConfig plain = Preset("tiny");
  plain.template_relative_residual = true;
  EXPECT_EQ(ValidateModelConfig(plain).code(), absl::StatusCode::kInvalidArgument);
  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->template_relative_residual);
}

// template_residual_noise=0: the network sees only E, so with no modes two showers of one energy
// are the same whatever their noise, and showers of two energies differ; with the noise (the
// reference) they differ. It needs a template, and round-trips.
TEST(ModelsTest, ResidualWithoutNoiseIsOneShowerPerEnergy) {
  for (bool noise : {true, false}) {
    ModelConfig c = Preset("tiny-template");
    c.template_modes = 0;
    c.template_residual_noise = noise;
    auto state = NewTrainingState(c, 5);
    ASSERT_TRUE(state.ok()) << state.status();
    state->generator->eval();
    torch::NoGradGuard no_grad;
    at::Generator rng = at::make_generator<at::CPUGeneratorImpl>(3);
    const at::Tensor draws = at::randn({3, c.noise_dim()}, rng, at::kFloat);
    const at::Tensor energy = at::tensor({1.0f, 1.0f, 0.5f}).reshape({3, 1});
    const at::Tensor out =
        state->generator->forward(state->generator->MakeInput(energy, at::Tensor(), draws))
            .reshape({3, -1});
    EXPECT_EQ(at::equal(out[0], out[1]), !noise) << "noise " << noise;
    EXPECT_GT((out[0] - out[2]).abs().max().item<float>(), 1e-6) << "noise " << noise;
  }
  ModelConfig plain = Preset("tiny");
  plain.template_residual_noise = false;
  EXPECT_EQ(ValidateModelConfig(plain).code(), absl::StatusCode::kInvalidArgument);
  ModelConfig c = Preset("tiny-spots");
  c.template_residual_noise = false;
  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->template_residual_noise);
  auto reference = ParseModelConfig(SerializeModelConfig(Preset("tiny-spots")));
  ASSERT_TRUE(reference.ok());
  EXPECT_TRUE(reference->template_residual_noise);
}

// tiny-smeared is tiny-spots' networks started at the smeared-spots baseline (docs/MODELS.md).
TEST(ModelsTest, TinySmearedIsTinySpotsStartedAtTheSmearedBaseline) {
  const ModelConfig spots = Preset("tiny-spots");
  const ModelConfig c = Preset("tiny-smeared");
  EXPECT_EQ(c.preset, "tiny-smeared");
  EXPECT_TRUE(c.generator_spots);
  EXPECT_TRUE(c.ecal_loss_batch_mean);
  EXPECT_EQ(c.generator_spot_shape, 1.0);
  EXPECT_EQ(c.template_learning_rate_scale, 0.0);
  EXPECT_EQ(c.template_residual_init, 0.0);
  EXPECT_EQ(c.discriminator_learning_rate_scale, 4.0);
  EXPECT_DOUBLE_EQ(c.learning_rate, 7.5e-5);
  EXPECT_TRUE(ValidateModelConfig(c).ok()) << ValidateModelConfig(c);
  EXPECT_EQ(TrainableParameters(*Generator(c)), TrainableParameters(*Generator(spots)));
  EXPECT_EQ(TrainableParameters(*Discriminator(c)), TrainableParameters(*Discriminator(spots)));
  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SerializeModelConfig(*back), SerializeModelConfig(c));
}

// A config from a job or a checkpoint cannot ask for networks of billions of parameters.
TEST(ModelsTest, ConfigsAreBoundedBeforeAnyNetworkIsBuilt) {
  auto refused = [](const ModelConfig& c, const std::string& fragment) {
    const absl::Status s = ValidateModelConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s;
  };
  ModelConfig c = Preset("3dgan-25");
  c.generator_filters = {100000, 6, 6};
  refused(c, "generator_filters must be <= 512");
  c = Preset("3dgan-25");
  c.discriminator_filters = {512, 512, 512, 512};
  refused(c, "channel pairs");
  c = Preset("3dgan-25");
  c.latent = int64_t{1} << 40;
  refused(c, "latent must be <= 4096");
  c = Preset("3dgan-25");
  c.dense_channels = 100000;
  refused(c, "dense_channels must be <= 256");
  c = Preset("3dgan-25");
  c.default_batch = int64_t{1} << 30;
  refused(c, "default_batch");
  c = Preset("3dgan-25");
  c.ecal_fit.assign(1000, 1.0);
  refused(c, "ecal_fit");
  const absl::Status text = ParseModelConfig(std::string(1 << 20, 'x')).status();
  EXPECT_EQ(text.code(), absl::StatusCode::kInvalidArgument) << text;
  EXPECT_NE(text.message().find("at most 65536"), std::string::npos) << text;
}

TEST(ModelsTest, KerasEquivalentLayerSettings) {
  const ModelConfig c = Preset("3dgan-25");
  const auto g = GeneratorStages(c);
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0].pad[0][0], 2);  // "same" for an even kernel: 2 before, 3 after
  EXPECT_EQ(g[0].pad[0][1], 3);
  EXPECT_EQ(g[1].upsample[2], 2);
  EXPECT_EQ(g[2].upsample[2], 3);
  EXPECT_DOUBLE_EQ(g[0].bn_momentum, 0.01);
  EXPECT_DOUBLE_EQ(g[0].leaky_slope, 0.3);
  EXPECT_FALSE(g[3].bias);
  EXPECT_EQ(Preset("3dgan-51").generator_bn_eps, 1e-6);
}

}  // namespace
}  // namespace gantry::gan
