// Tests of the trainer, checkpoints and generation on small toy Monte Carlo samples.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "showers/toy_mc.h"
#include "tests/gan/test_data.h"
#include "workers/gan/checkpoint.h"
#include "workers/gan/condition_fit.h"
#include "workers/gan/shower_generator.h"
#include "workers/gan/trainer.h"

namespace gantry::gan {
namespace {

constexpr int kThreads = 1;  // steadier than 2 on a shared 2-core machine

ModelConfig Tiny() { return *PresetConfig("tiny"); }

TrainerOptions Options(uint64_t seed) {
  TrainerOptions o;
  o.batch_size = 2;
  o.max_steps_per_epoch = 3;  // epochs of 3 steps, so short runs cross an epoch boundary
  o.seed = seed;
  o.threads = kThreads;
  return o;
}

const showers::ShowerSet& Showers() {
  static const showers::ShowerSet* set = new showers::ShowerSet(testing::FixedAngleShowers(12));
  return *set;
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::getpid()) + ".ckpt"))
      .string();
}

using testing::Weights;

bool BitIdentical(const TrainingState& a, const TrainingState& b) {
  const auto wa = Weights(a), wb = Weights(b);
  if (wa.size() != wb.size()) return false;
  for (size_t i = 0; i < wa.size(); ++i) {
    if (!at::equal(wa[i], wb[i])) return false;
  }
  return true;
}

std::unique_ptr<Trainer> MakeTrainer(uint64_t seed, ModelConfig config = Tiny()) {
  auto trainer = Trainer::Create(config, Showers(), Options(seed));
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  return trainer.ok() ? *std::move(trainer) : nullptr;
}

TEST(TrainerTest, ToyMcSampleIsUsable) {
  ASSERT_EQ(Showers().events(), 12);
  auto trainer = MakeTrainer(1);
  ASSERT_NE(trainer, nullptr);
  EXPECT_EQ(trainer->batch_size(), 2);
  EXPECT_EQ(trainer->steps_per_epoch(), 3);
}

TEST(TrainerTest, StepReportsFiniteLossesAndThroughput) {
  auto trainer = MakeTrainer(1);
  ASSERT_NE(trainer, nullptr);
  std::vector<StepReport> seen;
  trainer->set_step_callback([&seen](const StepReport& r) { seen.push_back(r); });
  auto report = trainer->Step();
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(report->step, 1);
  ASSERT_EQ(report->generator_loss.size(), 4u);  // total, BCE, MAPE(E), MAPE(ecal)
  ASSERT_EQ(report->discriminator_fake_loss.size(), 4u);
  for (double v : report->generator_loss) EXPECT_TRUE(std::isfinite(v));
  // total = the config's weighted sum of BCE, MAPE(E), MAPE(ecal)
  const auto& g = report->generator_loss;
  const auto& w = trainer->config().loss_weights;
  EXPECT_NEAR(g[0], w[0] * g[1] + w[1] * g[2] + w[2] * g[3], 1e-3 * std::abs(g[0]));
  // The ecal head of a real image is its own sum: zero loss on the real batch.
  EXPECT_NEAR(report->discriminator_real_loss[3], 0.0, 1e-3);
  EXPECT_GT(report->samples_per_second, 0.0);
}

// With the profile loss the generator's losses carry it last, and the total includes it with its
// weight; a config with the weight but no fitted profile is refused before training.
TEST(TrainerTest, ProfileLossIsReportedAndWeighted) {
  ModelConfig config = Tiny();
  config.profile_loss_weight = 0.7;
  auto unfitted = Trainer::Create(config, Showers(), Options(1));
  EXPECT_EQ(unfitted.status().code(), absl::StatusCode::kFailedPrecondition) << unfitted.status();
  EXPECT_NE(unfitted.status().message().find("profile_fit"), std::string::npos);
  std::vector<int64_t> rows(static_cast<size_t>(Showers().events()));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  auto sample = SampleConditions(config, Showers(), rows);
  ASSERT_TRUE(sample.ok()) << sample.status();
  ASSERT_TRUE(FitConditionsToData(*sample, &config).ok());
  ASSERT_EQ(config.profile_fit.size(), 150u);
  auto trainer = MakeTrainer(1, config);
  ASSERT_NE(trainer, nullptr);
  auto report = trainer->Step();
  ASSERT_TRUE(report.ok()) << report.status();
  const auto& g = report->generator_loss;
  ASSERT_EQ(g.size(), 5u);  // total, BCE, MAPE(E), MAPE(ecal), profile
  const auto& w = trainer->config().loss_weights;
  EXPECT_GT(g[4], 0.0);
  EXPECT_NEAR(g[0], w[0] * g[1] + w[1] * g[2] + w[2] * g[3] + 0.7 * g[4], 1e-3 * std::abs(g[0]));
  EXPECT_EQ(report->discriminator_fake_loss.size(), 4u);  // the discriminator's are unchanged
}

TEST(TrainerTest, DeterministicForSeedAndThreads) {
  auto a = MakeTrainer(11), b = MakeTrainer(11), c = MakeTrainer(12);
  ASSERT_TRUE(a && b && c);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(a->Step().ok());
    ASSERT_TRUE(b->Step().ok());
    ASSERT_TRUE(c->Step().ok());
  }
  EXPECT_TRUE(BitIdentical(a->state(), b->state()));
  EXPECT_FALSE(BitIdentical(a->state(), c->state()));
}

TEST(TrainerTest, GradientHookSeesEveryUpdateBeforeTheOptimizer) {
  auto trainer = MakeTrainer(3);
  ASSERT_NE(trainer, nullptr);
  std::vector<TrainPhase> phases;
  bool grads_ready = true;
  trainer->set_gradient_hook([&](TrainPhase phase, torch::nn::Module& model) {
    phases.push_back(phase);
    for (const auto& p : model.parameters()) grads_ready = grads_ready && p.grad().defined();
    return absl::OkStatus();
  });
  ASSERT_TRUE(trainer->Step().ok());
  EXPECT_EQ(phases,
            (std::vector<TrainPhase>{TrainPhase::kDiscriminatorReal, TrainPhase::kDiscriminatorFake,
                                     TrainPhase::kGenerator, TrainPhase::kGenerator}));
  EXPECT_TRUE(grads_ready);
  trainer->set_gradient_hook(
      [](TrainPhase, torch::nn::Module&) { return absl::UnavailableError("peer lost"); });
  EXPECT_EQ(trainer->Step().status().code(), absl::StatusCode::kUnavailable);
}

TEST(TrainerTest, CollapseGuardAbortsOnEmptyShowers) {
  auto trainer = MakeTrainer(4);
  ASSERT_NE(trainer, nullptr);
  {
    torch::NoGradGuard no_grad;
    // The last conv (ReLU output) with zero weights: every generated image is empty.
    for (auto& item : trainer->mutable_state().generator->named_parameters()) {
      if (item.key().rfind("stage3.", 0) == 0) item.value().zero_();
    }
  }
  auto report = trainer->Step();
  ASSERT_EQ(report.status().code(), absl::StatusCode::kAborted) << report.status();
  EXPECT_NE(report.status().message().find("collapsed"), std::string::npos);
}

TEST(TrainerTest, EpochsAndCallbacks) {
  TrainerOptions o = Options(5);
  o.epochs = 2;
  o.max_steps_per_epoch = 1;
  ModelConfig config = Tiny();
  config.label_flip = 0.0;
  auto trainer = Trainer::Create(config, Showers(), o);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  std::vector<EpochReport> epochs;
  (*trainer)->set_epoch_callback([&](const EpochReport& r) { epochs.push_back(r); });
  ASSERT_TRUE((*trainer)->Train().ok());
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[1].epoch, 1);
  EXPECT_EQ(epochs[1].steps, 1);
  EXPECT_GT(epochs[1].samples_per_second, 0);
  EXPECT_EQ((*trainer)->state().step, 2);
  EXPECT_EQ((*trainer)->state().epoch, 2);
}

TEST(TrainerTest, RejectsDataOfTheWrongGrid) {
  showers::ToyMcConfig mc;
  mc.layout = showers::Layout::kVariableAngle3DGan;
  mc.events = 2;
  auto set = showers::SimulateToyMc(mc);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(Trainer::Create(Tiny(), *set, Options(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A scaled-down 3dgan-51 (same topology, 2 filters everywhere) runs its four-loss step.
TEST(TrainerTest, VariableAngleStep) {
  ModelConfig config = *PresetConfig("3dgan-51");
  config.latent = 8;
  config.dense_channels = 2;
  config.generator_filters = {2, 2, 2, 2, 2, 2};
  config.discriminator_filters = {2, 2, 2, 2};
  showers::ToyMcConfig mc;
  mc.layout = showers::Layout::kVariableAngle3DGan;
  mc.events = 4;
  mc.energy_min_gev = 50;
  auto set = showers::SimulateToyMc(mc);
  ASSERT_TRUE(set.ok()) << set.status();
  TrainerOptions o = Options(2);
  o.batch_size = 2;
  auto trainer = Trainer::Create(config, *set, o);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto report = (*trainer)->Step();
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->generator_loss.size(), 5u);  // total, BCE, MAPE(E), MAE(theta), MAPE(ecal)
  for (double v : report->generator_loss) EXPECT_TRUE(std::isfinite(v));
  // Generation needs one angle per energy.
  ShowerGenerator generator((*trainer)->config(), (*trainer)->state().generator);
  GenerationRequest request;
  request.energy_gev = {100.0f};
  EXPECT_EQ(generator.Generate(request).status().code(), absl::StatusCode::kInvalidArgument);
  request.theta_rad = {1.4f};
  auto showers = generator.Generate(request);
  ASSERT_TRUE(showers.ok()) << showers.status();
  EXPECT_EQ(showers->layout, showers::Layout::kVariableAngle3DGan);
  EXPECT_EQ(showers->shape, (std::array<int64_t, 3>{51, 51, 25}));
  EXPECT_EQ(showers->theta_rad, request.theta_rad);
}

TEST(CheckpointTest, ResumeContinuesBitForBit) {
  const std::string path = TempPath("resume");
  auto straight = MakeTrainer(21);
  ASSERT_NE(straight, nullptr);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(straight->Step().ok());  // crosses an epoch boundary

  auto first = MakeTrainer(21);
  ASSERT_NE(first, nullptr);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(first->Step().ok());
  ASSERT_TRUE(first->SaveCheckpoint(path).ok());
  first.reset();
  auto resumed = Trainer::Resume(path, Showers(), Options(999));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ((*resumed)->state().step, 2);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*resumed)->Step().ok());
  EXPECT_EQ((*resumed)->state().step, 4);
  EXPECT_EQ((*resumed)->state().epoch, straight->state().epoch);
  EXPECT_TRUE(BitIdentical(straight->state(), (*resumed)->state()));
  std::remove(path.c_str());
}

TEST(CheckpointTest, RoundTripKeepsConfigCountersAndWeights) {
  const std::string path = TempPath("roundtrip");
  auto trainer = MakeTrainer(8);
  ASSERT_NE(trainer, nullptr);
  ASSERT_TRUE(trainer->Step().ok());
  ASSERT_TRUE(trainer->SaveCheckpoint(path).ok());
  auto state = ReadCheckpoint(path);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(SerializeModelConfig(state->config), SerializeModelConfig(trainer->config()));
  EXPECT_EQ(state->step, 1);
  EXPECT_EQ(state->epoch_cursor, 2);
  EXPECT_EQ(state->seed, 8u);
  EXPECT_TRUE(BitIdentical(*state, trainer->state()));
  std::remove(path.c_str());
}

TEST(CheckpointTest, DamagedFilesGiveClearErrors) {
  const std::string path = TempPath("damaged");
  auto trainer = MakeTrainer(9);
  ASSERT_NE(trainer, nullptr);
  ASSERT_TRUE(trainer->SaveCheckpoint(path).ok());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto write = [&path](const std::string& b) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(b.data(), static_cast<std::streamsize>(b.size()));
  };
  write(bytes.substr(0, bytes.size() / 2));  // truncated
  auto r = ReadCheckpoint(path);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos);

  std::string flipped = bytes;
  flipped[flipped.size() - 100] ^= 0x5a;  // one corrupted payload byte
  write(flipped);
  r = ReadCheckpoint(path);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_NE(r.status().message().find("sha256"), std::string::npos);

  write("this is not a checkpoint\n");
  EXPECT_EQ(ReadCheckpoint(path).status().code(), absl::StatusCode::kInvalidArgument);
  write("");
  EXPECT_EQ(ReadCheckpoint(path).status().code(), absl::StatusCode::kInvalidArgument);

  // A consistent header over a payload that is not a torch archive: decoding fails cleanly.
  const std::string junk(1000, 'x');
  write(std::string("GANTRY-CHECKPOINT 1\nsha256 ") + gantry::Sha256Hex(junk) + "\nbytes 1000\n" +
        junk);
  r = ReadCheckpoint(path);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();

  std::remove(path.c_str());
  EXPECT_EQ(ReadCheckpoint(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(GenerationTest, GeneratesShowersInGevFromACheckpoint) {
  const std::string path = TempPath("generate");
  auto trainer = MakeTrainer(10);
  ASSERT_NE(trainer, nullptr);
  ASSERT_TRUE(trainer->Step().ok());
  ASSERT_TRUE(trainer->SaveCheckpoint(path).ok());
  auto generator = ShowerGenerator::Load(path);
  ASSERT_TRUE(generator.ok()) << generator.status();
  GenerationRequest request;
  request.energy_gev = {50.0f, 100.0f, 400.0f};
  request.batch_size = 2;  // two batches
  request.seed = 3;
  auto showers = (*generator)->Generate(request);
  ASSERT_TRUE(showers.ok()) << showers.status();
  EXPECT_EQ(showers->layout, showers::Layout::kFixedAngle3DGan);
  EXPECT_EQ(showers->shape, (std::array<int64_t, 3>{25, 25, 25}));
  EXPECT_EQ(showers->energy_gev, request.energy_gev);
  ASSERT_EQ(showers->cells.size(), 3u * 25 * 25 * 25);
  for (float v : showers->cells) ASSERT_GE(v, 0.0f);

  // GeV = network output / 100: rerun the generator on the same noise by hand.
  Generator g = trainer->state().generator;
  g->eval();
  at::Generator rng = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor noise = at::randn({2, g->noise_dim()}, rng, at::kFloat);
  const at::Tensor image =
      g->forward(g->MakeInput(at::tensor({0.5f, 1.0f}).view({2, 1}), at::Tensor(), noise));
  const float* second = showers->event(1);
  const at::Tensor expected = image[1].flatten() / 100.0;
  for (int64_t c = 0; c < 25 * 25 * 25; c += 997) {
    EXPECT_NEAR(second[c], expected[c].item<float>(), 1e-6f + 1e-5f * second[c]);
  }

  // Same request, same showers; another seed, other showers.
  auto again = (*generator)->Generate(request);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cells, showers->cells);
  request.seed = 4;
  auto other = (*generator)->Generate(request);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->cells, showers->cells);

  request.energy_gev = {};
  EXPECT_EQ((*generator)->Generate(request).status().code(), absl::StatusCode::kInvalidArgument);
  request.energy_gev = {-5.0f};
  EXPECT_EQ((*generator)->Generate(request).status().code(), absl::StatusCode::kInvalidArgument);
  std::remove(path.c_str());
}

// A generator with spot sampling: the trainer refuses it until its spot energy is fitted; fitted,
// it trains, and Generate gives showers whose cells are whole numbers of spots (in GeV), with far
// fewer non-zero cells than its expected showers; serving's path (GenerateFromNoise, then
// DrawSpots per shower) draws the same spots for the same shower's expected cells.
TEST(GenerationTest, SpotSamplingTrainsAndGeneratesWholeSpots) {
  ModelConfig config = *PresetConfig("tiny-template");
  config.generator_spots = true;
  ModelConfig without_profile = config;  // whose unfitted profile would be refused first
  without_profile.profile_loss_weight = 0;
  auto unfitted = Trainer::Create(without_profile, Showers(), Options(1));
  EXPECT_EQ(unfitted.status().code(), absl::StatusCode::kFailedPrecondition) << unfitted.status();
  EXPECT_NE(unfitted.status().message().find("generator_spot_gev"), std::string::npos);
  std::vector<int64_t> rows(static_cast<size_t>(Showers().events()));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  auto sample = SampleConditions(config, Showers(), rows);
  ASSERT_TRUE(sample.ok()) << sample.status();
  ASSERT_TRUE(FitConditionsToData(*sample, &config).ok());
  ASSERT_GT(config.generator_spot_gev, 0);
  auto trainer = MakeTrainer(1, config);
  ASSERT_NE(trainer, nullptr);
  ASSERT_TRUE(trainer->mutable_state().generator->SetShowerTemplate(sample->shower_template).ok());
  for (int i = 0; i < 2; ++i) {
    auto report = trainer->Step();
    ASSERT_TRUE(report.ok()) << report.status();
    for (double v : report->generator_loss) EXPECT_TRUE(std::isfinite(v));
  }
  const std::string path = TempPath("spots");
  ASSERT_TRUE(trainer->SaveCheckpoint(path).ok());
  auto generator = ShowerGenerator::Load(path);
  std::remove(path.c_str());
  ASSERT_TRUE(generator.ok()) << generator.status();
  GenerationRequest request;
  request.energy_gev = {50.0f, 150.0f};
  request.seed = 3;
  auto showers = (*generator)->Generate(request);
  ASSERT_TRUE(showers.ok()) << showers.status();
  const double spot = config.generator_spot_gev;
  int64_t nonzero = 0;
  for (float v : showers->cells) {
    ASSERT_NEAR(v / spot, std::round(v / spot), 1e-3) << v;
    nonzero += v > 0;
  }
  Generator g = trainer->state().generator;
  g->eval();
  at::Generator rng = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor noise = at::randn({2, g->noise_dim()}, rng, at::kFloat);
  const at::Tensor expected =
      g->forward(g->MakeInput(at::tensor({0.5f, 1.5f}).view({2, 1}), at::Tensor(), noise));
  EXPECT_LT(nonzero, expected.gt(0).sum().item<int64_t>() / 2);
  // Serving: the expected showers from the same noise, then each one's spots.
  ASSERT_TRUE((*generator)->draws_spots());
  const int64_t cells = (*generator)->cells_per_shower();
  std::vector<float> out(2 * static_cast<size_t>(cells));
  ASSERT_TRUE((*generator)
                  ->GenerateFromNoise(request.energy_gev, {},
                                      absl::Span<const float>(noise.data_ptr<float>(),
                                                              static_cast<size_t>(noise.numel())),
                                      out.data())
                  .ok());
  int64_t served_nonzero = 0;
  for (int i = 0; i < 2; ++i) {
    (*generator)->DrawSpots(request.seed, static_cast<uint64_t>(i), out.data() + i * cells);
  }
  for (size_t c = 0; c < out.size(); ++c) {
    served_nonzero += out[c] > 0;
    ASSERT_NEAR(out[c], showers->cells[c], 1e-5f + 1e-4f * out[c]) << c;
  }
  EXPECT_EQ(served_nonzero, nonzero);
}

// template_learning_rate_scale: the shower template is a parameter group of its own whose
// rate is the scale times the network's. RMSprop's first steps move a parameter by about
// lr / sqrt(1 - rho) whatever its gradient, so after one trainer step (two generator updates) the
// template's largest move at scale 0.5 is about half of that at scale 1, at 0 the template stays
// as fitted, and the network learns in every case. A run with its own group resumes bit for bit;
// the scale needs a template and stays in [0, 10].
TEST(TrainerTest, TemplateLearningRateScalesTheTemplatesSteps) {
  ModelConfig config = *PresetConfig("tiny-template");
  std::vector<int64_t> rows(static_cast<size_t>(Showers().events()));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  auto sample = SampleConditions(config, Showers(), rows);
  ASSERT_TRUE(sample.ok()) << sample.status();
  ASSERT_TRUE(FitConditionsToData(*sample, &config).ok());
  auto make = [&](uint64_t seed, double scale) {
    ModelConfig c = config;
    c.template_learning_rate_scale = scale;
    auto trainer = MakeTrainer(seed, c);
    if (trainer != nullptr) {
      EXPECT_TRUE(
          trainer->mutable_state().generator->SetShowerTemplate(sample->shower_template).ok());
    }
    return trainer;
  };
  auto step_once = [&](double scale, double* template_move, double* dense_move) {
    auto trainer = make(1, scale);
    ASSERT_NE(trainer, nullptr);
    Generator g = trainer->mutable_state().generator;
    const at::Tensor t0 = g->shower_template().detach().clone();
    const at::Tensor w0 = g->named_parameters()["dense.weight"].detach().clone();
    auto report = trainer->Step();
    ASSERT_TRUE(report.ok()) << report.status();
    *template_move = (g->shower_template() - t0).abs().max().item<double>();
    *dense_move = (g->named_parameters()["dense.weight"] - w0).abs().max().item<double>();
    const auto& groups = trainer->state().generator_optimizer->param_groups();
    ASSERT_EQ(groups.size(), scale == 1 ? 1u : 2u);
    if (scale != 1) {
      EXPECT_DOUBLE_EQ(
          static_cast<const torch::optim::RMSpropOptions&>(groups[1].options()).lr(),
          report->learning_rate * scale);
    }
  };
  double full = 0, half = 0, frozen = 0, dense_full = 0, dense_half = 0, dense_frozen = 0;
  step_once(1.0, &full, &dense_full);
  step_once(0.5, &half, &dense_half);
  step_once(0.0, &frozen, &dense_frozen);
  EXPECT_GT(full, 0);
  EXPECT_NEAR(half / full, 0.5, 0.1) << half << " against " << full;
  EXPECT_EQ(frozen, 0);
  for (double d : {dense_full, dense_half, dense_frozen}) EXPECT_GT(d, 0);

  const std::string path = TempPath("template-lr");
  auto straight = make(5, 0.5);
  ASSERT_NE(straight, nullptr);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(straight->Step().ok());
  auto first = make(5, 0.5);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->Step().ok());
  ASSERT_TRUE(first->SaveCheckpoint(path).ok());
  auto resumed = Trainer::Resume(path, Showers(), Options(999));
  std::remove(path.c_str());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE((*resumed)->Step().ok());
  EXPECT_TRUE(BitIdentical(straight->state(), (*resumed)->state()));

  ModelConfig c = config;
  c.template_learning_rate_scale = 0.5;
  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->template_learning_rate_scale, 0.5);
  c.template_learning_rate_scale = 11;
  EXPECT_FALSE(ValidateModelConfig(c).ok());
  auto plain = OverrideModelConfig(Tiny(), "template_learning_rate_scale=0");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("needs generator_template"), std::string::npos)
      << plain.status();
}

// template_residual_learning_rate_scale: the generator's last conv (the residual added to the
// template) is a parameter group of its own whose rate is the scale times the network's, after the
// template's group when that has one. From a zero-initialised last conv, RMSprop's first step moves
// each weight by about lr / sqrt(1 - rho) whatever its gradient, so after one trainer step the last
// conv's largest move at scale 0.5 is about half of that at scale 1, at 0 it stays at zero (and the
// showers are the template's). A run with both own
// groups resumes bit for bit; the scale needs a template and stays in [0, 10].
TEST(TrainerTest, TemplateResidualLearningRateScalesTheLastConvsSteps) {
  ModelConfig config = *PresetConfig("tiny-template");
  config.template_residual_init = 0;
  std::vector<int64_t> rows(static_cast<size_t>(Showers().events()));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  auto sample = SampleConditions(config, Showers(), rows);
  ASSERT_TRUE(sample.ok()) << sample.status();
  ASSERT_TRUE(FitConditionsToData(*sample, &config).ok());
  const std::string last = "stage" + std::to_string(GeneratorStages(config).size() - 1) + ".";
  auto make = [&](uint64_t seed, double template_scale, double residual_scale) {
    ModelConfig c = config;
    c.template_learning_rate_scale = template_scale;
    c.template_residual_learning_rate_scale = residual_scale;
    auto trainer = MakeTrainer(seed, c);
    if (trainer != nullptr) {
      EXPECT_TRUE(
          trainer->mutable_state().generator->SetShowerTemplate(sample->shower_template).ok());
    }
    return trainer;
  };
  auto last_conv = [&](Generator& g) {
    std::vector<at::Tensor> out;
    for (const auto& item : g->named_parameters()) {
      if (item.key().rfind(last, 0) == 0) out.push_back(item.value().detach().clone());
    }
    return out;
  };
  auto step_once = [&](double scale, double* residual_move, double* dense_move) {
    auto trainer = make(1, 1.0, scale);
    ASSERT_NE(trainer, nullptr);
    Generator g = trainer->mutable_state().generator;
    const std::vector<at::Tensor> r0 = last_conv(g);
    ASSERT_FALSE(r0.empty());
    for (const at::Tensor& t : r0) EXPECT_EQ(t.abs().max().item<double>(), 0);
    const at::Tensor w0 = g->named_parameters()["dense.weight"].detach().clone();
    auto report = trainer->Step();
    ASSERT_TRUE(report.ok()) << report.status();
    const std::vector<at::Tensor> r1 = last_conv(g);
    *residual_move = 0;
    for (size_t i = 0; i < r0.size(); ++i) {
      *residual_move = std::max(*residual_move, (r1[i] - r0[i]).abs().max().item<double>());
    }
    *dense_move = (g->named_parameters()["dense.weight"] - w0).abs().max().item<double>();
    const auto& groups = trainer->state().generator_optimizer->param_groups();
    ASSERT_EQ(groups.size(), scale == 1 ? 1u : 2u);
    if (scale != 1) {
      EXPECT_EQ(groups[1].params().size(), r0.size());
      EXPECT_DOUBLE_EQ(static_cast<const torch::optim::RMSpropOptions&>(groups[1].options()).lr(),
                       report->learning_rate * scale);
    }
  };
  double full = 0, half = 0, frozen = 0, dense_full = 0, dense_half = 0, dense_frozen = 0;
  step_once(1.0, &full, &dense_full);
  step_once(0.5, &half, &dense_half);
  step_once(0.0, &frozen, &dense_frozen);
  EXPECT_GT(full, 0);
  EXPECT_NEAR(half / full, 0.5, 0.1) << half << " against " << full;
  EXPECT_EQ(frozen, 0);
  // The dense layer learns once the last conv is no longer zero (the trainer step's second
  // generator update); a last conv frozen at zero passes it no gradient at all.
  EXPECT_GT(dense_full, 0);
  EXPECT_GT(dense_half, 0);
  EXPECT_EQ(dense_frozen, 0);

  // Both own groups: the network, the template, the residual, each at its rate.
  const std::string path = TempPath("residual-lr");
  auto straight = make(5, 0.25, 0.5);
  ASSERT_NE(straight, nullptr);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(straight->Step().ok());
  const auto& groups = straight->state().generator_optimizer->param_groups();
  ASSERT_EQ(groups.size(), 3u);
  const double lr = static_cast<const torch::optim::RMSpropOptions&>(groups[0].options()).lr();
  EXPECT_DOUBLE_EQ(static_cast<const torch::optim::RMSpropOptions&>(groups[1].options()).lr(),
                   0.25 * lr);
  EXPECT_DOUBLE_EQ(static_cast<const torch::optim::RMSpropOptions&>(groups[2].options()).lr(),
                   0.5 * lr);
  auto first = make(5, 0.25, 0.5);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->Step().ok());
  ASSERT_TRUE(first->SaveCheckpoint(path).ok());
  auto resumed = Trainer::Resume(path, Showers(), Options(999));
  std::remove(path.c_str());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE((*resumed)->Step().ok());
  EXPECT_TRUE(BitIdentical(straight->state(), (*resumed)->state()));

  ModelConfig c = config;
  c.template_residual_learning_rate_scale = 0.1;
  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->template_residual_learning_rate_scale, 0.1);
  c.template_residual_learning_rate_scale = 11;
  EXPECT_FALSE(ValidateModelConfig(c).ok());
  auto plain = OverrideModelConfig(Tiny(), "template_residual_learning_rate_scale=0.1");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("needs generator_template"), std::string::npos)
      << plain.status();
}

// discriminator_learning_rate_scale sets the discriminator's rate to the scale times the scheduled
// rate and leaves the generator's alone: after one step the discriminator's optimizer holds that
// rate, its largest first move (RMSprop: about lr / sqrt(1 - rho) whatever the gradient) is about
// the scale times that at scale 1, the generator still learns. The scale is stored, round-trips and
// stays in (0, 100].
TEST(TrainerTest, DiscriminatorLearningRateScaleSetsItsRateApart) {
  auto copy_of = [](const torch::nn::Module& m) {
    std::vector<at::Tensor> copy;
    for (const auto& p : m.parameters()) copy.push_back(p.detach().clone());
    return copy;
  };
  // The largest change of any parameter of m since `before`.
  auto largest_move = [](const torch::nn::Module& m, const std::vector<at::Tensor>& before) {
    const std::vector<at::Tensor> now = m.parameters();
    double move = 0;
    for (size_t i = 0; i < now.size(); ++i) {
      move = std::max(move, (now[i] - before[i]).abs().max().item<double>());
    }
    return move;
  };
  auto step_once = [&](double scale, double* discriminator_move, double* generator_move) {
    ModelConfig c = Tiny();
    c.discriminator_learning_rate_scale = scale;
    auto trainer = MakeTrainer(1, c);
    ASSERT_NE(trainer, nullptr);
    Discriminator d = trainer->mutable_state().discriminator;
    Generator g = trainer->mutable_state().generator;
    const std::vector<at::Tensor> d0 = copy_of(*d), g0 = copy_of(*g);
    auto report = trainer->Step();
    ASSERT_TRUE(report.ok()) << report.status();
    for (const auto& group : trainer->state().discriminator_optimizer->param_groups()) {
      EXPECT_DOUBLE_EQ(static_cast<const torch::optim::RMSpropOptions&>(group.options()).lr(),
                       report->learning_rate * scale);
    }
    for (const auto& group : trainer->state().generator_optimizer->param_groups()) {
      EXPECT_DOUBLE_EQ(static_cast<const torch::optim::RMSpropOptions&>(group.options()).lr(),
                       report->learning_rate);
    }
    *discriminator_move = largest_move(*d, d0);
    *generator_move = largest_move(*g, g0);
  };
  double d_one = 0, g_one = 0, d_quarter = 0, g_quarter = 0;
  step_once(1.0, &d_one, &g_one);
  step_once(0.25, &d_quarter, &g_quarter);
  ASSERT_GT(d_one, 0);
  EXPECT_NEAR(d_quarter / d_one, 0.25, 0.05) << d_quarter << " against " << d_one;
  EXPECT_GT(g_one, 0);
  EXPECT_GT(g_quarter, 0);

  ModelConfig c = Tiny();
  c.discriminator_learning_rate_scale = 4;
  auto back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->discriminator_learning_rate_scale, 4);
  auto old = ParseModelConfig(SerializeModelConfig(Tiny()));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->discriminator_learning_rate_scale, 1);
  for (double bad : {0.0, -1.0, 101.0, std::nan("")}) {
    c.discriminator_learning_rate_scale = bad;
    EXPECT_FALSE(ValidateModelConfig(c).ok()) << bad;
  }
  auto set = OverrideModelConfig(Tiny(), "discriminator_learning_rate_scale=2.5");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->discriminator_learning_rate_scale, 2.5);
}

// generator_energy_loss_weight reweights the energy head's loss in the generator's updates only:
// set to loss_weights[1] it is the default (-1) bit for bit; at 0 the first step's discriminator
// update (which comes before the generator's) is the same and the generator's differ. Values other
// than -1 outside [0, 1000] are refused.
TEST(TrainerTest, GeneratorEnergyLossWeightChangesTheGeneratorsUpdatesOnly) {
  ModelConfig c = Tiny();
  auto base = MakeTrainer(3, c);
  c.generator_energy_loss_weight = c.loss_weights[1];
  auto same = MakeTrainer(3, c);
  c.generator_energy_loss_weight = 0;
  auto without = MakeTrainer(3, c);
  ASSERT_TRUE(base && same && without);
  for (auto* t : {base.get(), same.get(), without.get()}) ASSERT_TRUE(t->Step().ok());
  EXPECT_TRUE(BitIdentical(base->state(), same->state()));
  auto equal = [](const torch::nn::Module& a, const torch::nn::Module& b) {
    const auto pa = a.parameters(), pb = b.parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
      if (!at::equal(pa[i], pb[i])) return false;
    }
    return true;
  };
  EXPECT_TRUE(equal(*base->state().discriminator, *without->state().discriminator));
  EXPECT_FALSE(equal(*base->state().generator, *without->state().generator));
  c.generator_energy_loss_weight = -0.5;
  EXPECT_FALSE(ValidateModelConfig(c).ok());
  auto back = ParseModelConfig(SerializeModelConfig(*OverrideModelConfig(
      Tiny(), "generator_energy_loss_weight=0")));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->generator_energy_loss_weight, 0);
}

// discriminator_feature_units: the feature head trains with the discriminator (its weights move
// in the discriminator's updates and stay in the generator's), resumes bit for bit, and is refused
// with data parallelism, whose ranks would each see a part of the batch whose spread it reads.
TEST(TrainerTest, DiscriminatorFeatureHeadTrainsAndResumes) {
  ModelConfig c = Tiny();
  c.discriminator_feature_units = 8;
  auto trainer = MakeTrainer(4, c);
  ASSERT_NE(trainer, nullptr);
  auto params = trainer->state().discriminator->named_parameters();
  ASSERT_TRUE(params.contains("feature_hidden.weight") && params.contains("feature_logit.weight"));
  const at::Tensor hidden0 = params["feature_hidden.weight"].detach().clone();
  const at::Tensor logit0 = params["feature_logit.weight"].detach().clone();
  auto report = trainer->Step();
  ASSERT_TRUE(report.ok()) << report.status();
  for (double v : report->generator_loss) EXPECT_TRUE(std::isfinite(v));
  EXPECT_FALSE(at::equal(params["feature_hidden.weight"], hidden0));
  EXPECT_FALSE(at::equal(params["feature_logit.weight"], logit0));

  const std::string path = TempPath("feature-head");
  auto straight = MakeTrainer(6, c);
  ASSERT_NE(straight, nullptr);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(straight->Step().ok());
  auto first = MakeTrainer(6, c);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->Step().ok());
  ASSERT_TRUE(first->SaveCheckpoint(path).ok());
  auto resumed = Trainer::Resume(path, Showers(), Options(999));
  std::remove(path.c_str());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ((*resumed)->state().config.discriminator_feature_units, 8);
  ASSERT_TRUE((*resumed)->Step().ok());
  EXPECT_TRUE(BitIdentical(straight->state(), (*resumed)->state()));

  TrainerOptions two = Options(4);
  two.world_size = 2;
  auto split = Trainer::Create(c, Showers(), two);
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(split.status().message().find("discriminator_feature_units"), std::string::npos)
      << split.status();
}

// The spots are drawn from a stream of their own, seeded per draw from one number of the shared
// stream: however many numbers at::poisson takes for the cells' energies, the shared stream (the
// noise, flips and permutations every rank draws alike) advances the same, so two trainers whose
// only difference is the spot energy are in the same shared state after their steps, and a
// trainer with spots draws the same spots when run again.
TEST(TrainerTest, SpotDrawsLeaveTheSharedStreamAsEveryRankAdvancesIt) {
  ModelConfig config = *PresetConfig("tiny-template");
  config.generator_spots = true;
  config.profile_loss_weight = 0;
  config.fit_conditions_to_data = false;
  auto run = [&config](double spot_gev) {
    ModelConfig c = config;
    c.generator_spot_gev = spot_gev;
    auto trainer = MakeTrainer(5, c);
    EXPECT_NE(trainer, nullptr);
    for (int i = 0; i < 2 && trainer; ++i) EXPECT_TRUE(trainer->Step().ok());
    return trainer;
  };
  auto small = run(0.0002), large = run(0.002), again = run(0.0002);
  ASSERT_TRUE(small && large && again);
  EXPECT_TRUE(at::equal(small->state().rng.get_state(), large->state().rng.get_state()));
  EXPECT_TRUE(BitIdentical(small->state(), again->state()));
  EXPECT_FALSE(BitIdentical(small->state(), large->state()));
}

}  // namespace
}  // namespace gantry::gan
