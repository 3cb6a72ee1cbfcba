#include "workers/gan/trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "workers/gan/bf16_support.h"
#include "workers/gan/conv_stage.h"
#include "workers/gan/device.h"
#include "workers/gan/in_memory_batch_source.h"
#include "workers/gan/losses.h"

namespace gantry::gan {
namespace {

std::vector<double> Values(const LossTerms& t) {
  std::vector<double> v{t.total.item<double>()};
  for (const auto& p : t.parts) v.push_back(p.item<double>());
  return v;
}

void Accumulate(std::vector<double>& sum, const std::vector<double>& v, double weight) {
  if (sum.size() < v.size()) sum.resize(v.size(), 0.0);
  for (size_t i = 0; i < v.size(); ++i) sum[i] += weight * v[i];
}

void SetRequiresGrad(torch::nn::Module& m, bool on) {
  for (auto& p : m.parameters()) p.set_requires_grad(on);
}

void InstallCrossRankSum(torch::nn::Module& model, const std::shared_ptr<const CrossRankSum>& sum) {
  for (const auto& m : model.modules(/*include_self=*/false)) {
    if (auto stage = std::dynamic_pointer_cast<ConvStageImpl>(m)) stage->set_cross_rank_sum(sum);
  }
}

}  // namespace

double ScheduledLearningRate(double base_lr, const TrainerOptions& options, int64_t epoch,
                             int64_t step_in_epoch, int64_t steps_per_epoch) {
  const double target =
      options.scale_lr_with_world_size ? base_lr * std::max(1, options.world_size) : base_lr;
  const double epochs_done =
      static_cast<double>(epoch) + static_cast<double>(step_in_epoch) /
                                       static_cast<double>(std::max<int64_t>(1, steps_per_epoch));
  double decay = 1.0;
  if (options.lr_decay_to < 1.0 && options.epochs > 0) {
    const double t = std::clamp(epochs_done / static_cast<double>(options.epochs), 0.0, 1.0);
    decay = options.lr_decay_to + (1.0 - options.lr_decay_to) * 0.5 * (1.0 + std::cos(M_PI * t));
  }
  if (options.warmup_epochs <= 0 || target == base_lr) return target * decay;
  const double progress = epochs_done / static_cast<double>(options.warmup_epochs);
  if (progress >= 1.0) return target * decay;
  return (base_lr + (target - base_lr) * progress) * decay;
}

Trainer::Trainer(TrainingState state, std::unique_ptr<BatchSource> source,
                 const TrainerOptions& options)
    : state_(std::move(state)), source_(std::move(source)), options_(options) {
  const int64_t n = source_->events();
  const int64_t world = options.world_size;
  batch_size_ = std::min<int64_t>(
      options.batch_size > 0 ? options.batch_size : state_.config.default_batch, n / world);
  steps_per_epoch_ = std::max<int64_t>(1, n / (batch_size_ * world));
  if (options.max_steps_per_epoch > 0) {
    steps_per_epoch_ = std::min(steps_per_epoch_, options.max_steps_per_epoch);
  }
  if ((world > 1 || !options.device.is_cpu()) && state_.config.dropout > 0) {
    dropout_rng_ = options.device.is_cpu()
                       ? at::make_generator<at::CPUGeneratorImpl>(state_.seed)
                       : at::globalContext().defaultGenerator(options.device).clone();
    state_.discriminator->set_dropout_generator(dropout_rng_);
  }
  if (state_.config.generator_spots) spot_rng_ = at::make_generator<at::CPUGeneratorImpl>();
  if (options.cross_rank_sum) set_cross_rank_sum(options.cross_rank_sum);
}

void Trainer::set_cross_rank_sum(std::function<void(at::Tensor&)> sum) {
  options_.cross_rank_sum = sum;
  std::shared_ptr<const CrossRankSum> shared;
  if (sum) shared = std::make_shared<const CrossRankSum>(std::move(sum));
  InstallCrossRankSum(*state_.generator, shared);
  InstallCrossRankSum(*state_.discriminator, shared);
}

double Trainer::learning_rate() const {
  return ScheduledLearningRate(state_.config.learning_rate, options_, state_.epoch,
                               state_.epoch_cursor / global_batch_size(), steps_per_epoch_);
}

void Trainer::ApplyLearningRate(double lr) {
  auto set = [](torch::optim::OptimizerParamGroup& group, double rate) {
    static_cast<torch::optim::RMSpropOptions&>(group.options()).lr(rate);
  };
  const double discriminator_lr = lr * state_.config.discriminator_learning_rate_scale;
  for (auto& group : state_.discriminator_optimizer->param_groups()) set(group, discriminator_lr);
  auto& groups = state_.generator_optimizer->param_groups();
  const std::vector<double> scales = GeneratorGroupRateScales(state_.config);
  for (size_t i = 0; i < groups.size() && i < scales.size(); ++i) set(groups[i], lr * scales[i]);
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::CreateFromTensors(TrainingState state,
                                                                    TrainingTensors data,
                                                                    const TrainerOptions& options) {
  if (!data.images.defined() || data.images.size(0) == 0) {
    return absl::InvalidArgumentError("no training events");
  }
  return CreateFromSource(std::move(state), std::make_unique<InMemoryBatchSource>(std::move(data)),
                          options);
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::CreateFromSource(
    TrainingState state, std::unique_ptr<BatchSource> source, const TrainerOptions& options) {
  if (options.batch_size < 0 || options.epochs < 0 || options.threads < 0 ||
      options.max_steps_per_epoch < 0 || options.warmup_epochs < 0 ||
      !(options.lr_decay_to > 0 && options.lr_decay_to <= 1)) {
    return absl::InvalidArgumentError(
        "batch, epochs, threads, max steps and warm-up epochs must be >= 0, lr_decay_to in (0, 1]");
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options.rank, " of world size ",
                                                   options.world_size, " is out of range"));
  }
  if (source == nullptr || source->events() == 0) {
    return absl::InvalidArgumentError("no training events");
  }
  if (source->events() < options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(source->events(), " training events for ", options.world_size, " ranks"));
  }
  const ModelConfig& c = state.config;
  if (c.profile_loss_weight > 0 &&
      static_cast<int64_t>(c.profile_fit.size()) != 2 * c.profile_slices()) {
    return absl::FailedPreconditionError(
        "profile_loss_weight is set but the model config has no profile_fit: fit the conditions "
        "to the training data first (FitConditionsToData), or set profile_loss_weight=0");
  }
  if (c.discriminator_feature_units > 0 && options.world_size > 1) {
    return absl::InvalidArgumentError(
        "discriminator_feature_units reads the spread of each rank's batch, which data "
        "parallelism would split: train it with one rank, or set discriminator_feature_units=0");
  }
  if (c.generator_spots && !(c.generator_spot_gev > 0)) {
    return absl::FailedPreconditionError(
        "generator_spots is set but the model config has no generator_spot_gev: fit the "
        "conditions to the training data first (FitConditionsToData), or set generator_spots=0");
  }
  if (state.permutation.defined() && state.permutation.size(0) != source->events()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint was taken mid-epoch on ", state.permutation.size(0),
                     " events but the data set has ", source->events()));
  }
  RETURN_IF_ERROR(DeviceUsable(options.device));
  if (options.bf16_autocast) {
    if (!options.device.is_cuda()) {
      return absl::FailedPreconditionError(
          absl::StrCat("bf16 autocast training runs on a GPU; this rank's device is ",
                       DeviceName(options.device), ": train in float32 or place the job on a GPU"));
    }
    RETURN_IF_ERROR(Bf16Support(Bf16Device::kGpu));
  }
  if (options.threads > 0) at::set_num_threads(options.threads);
  try {
    MoveTrainingState(state, options.device);
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("moving the models to ", DeviceName(options.device),
                                            ": ", e.what_without_backtrace()));
  }
  return std::unique_ptr<Trainer>(new Trainer(std::move(state), std::move(source), options));
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::CreateWithSource(
    const ModelConfig& config, std::unique_ptr<BatchSource> source, const TrainerOptions& options) {
  absl::StatusOr<TrainingState> state = NewTrainingState(config, options.seed);
  if (!state.ok()) return state.status();
  return CreateFromSource(std::move(*state), std::move(source), options);
}

absl::Status Trainer::PlanEpoch() {
  const int64_t n_events = source_->events();
  const int64_t global = global_batch_size();
  const int64_t offset = options_.rank * batch_size_;
  const at::Tensor permutation = state_.permutation.contiguous();
  const int64_t* p = permutation.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> batches;
  // The steps Step() runs before it ends the epoch (same conditions).
  for (int64_t cursor = state_.epoch_cursor;
       cursor / global < steps_per_epoch_ && cursor + global <= n_events; cursor += global) {
    batches.emplace_back(p + cursor + offset, p + cursor + offset + batch_size_);
  }
  planned_epoch_ = state_.epoch;
  return source_->Plan(std::move(batches));
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const ModelConfig& config,
                                                         const showers::ShowerSet& showers,
                                                         const TrainerOptions& options) {
  absl::StatusOr<TrainingTensors> data = PreprocessShowers(config, showers);
  if (!data.ok()) return data.status();
  absl::StatusOr<TrainingState> state = NewTrainingState(config, options.seed);
  if (!state.ok()) return state.status();
  return CreateFromTensors(std::move(*state), std::move(*data), options);
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Resume(const std::string& checkpoint_path,
                                                         const showers::ShowerSet& showers,
                                                         const TrainerOptions& options) {
  absl::StatusOr<TrainingState> state = ReadCheckpoint(checkpoint_path);
  if (!state.ok()) return state.status();
  absl::StatusOr<TrainingTensors> data = PreprocessShowers(state->config, showers);
  if (!data.ok()) return data.status();
  return CreateFromTensors(std::move(*state), std::move(*data), options);
}

absl::Status Trainer::RunHook(TrainPhase phase, torch::nn::Module& model) {
  if (!gradient_hook_) return absl::OkStatus();
  return gradient_hook_(phase, model);
}

absl::StatusOr<StepReport> Trainer::Step() {
  const auto start = std::chrono::steady_clock::now();
  TrainingState& s = state_;
  StepReport report;
  report.epoch = s.epoch;
  try {
    const int64_t n_events = source_->events();
    RETURN_IF_ERROR(BeginStep(n_events, &report));
    s.generator->train();
    s.discriminator->train();
    HeadLabels real, fake;
    const at::Tensor generated = GenerateWithoutGrad(fake);
    real.real = RealFakeLabels(1.0);
    fake.real = RealFakeLabels(0.0);
    ASSIGN_OR_RETURN(const at::Tensor images, NextRealBatch(real, &report));
    RETURN_IF_ERROR(UpdateDiscriminator(images, generated, real, fake, &report));
    RETURN_IF_ERROR(UpdateGenerator(real, &report));
    RETURN_IF_ERROR(EndStep(n_events));
    report.step = s.step;
    FillThroughput(start, &report);
  } catch (const c10::Error& e) {
    SetRequiresGrad(*s.discriminator, true);
    return absl::InternalError(absl::StrCat("training step failed: ", e.what_without_backtrace()));
  }
  if (step_callback_) step_callback_(report);
  return report;
}

absl::Status Trainer::BeginStep(int64_t n_events, StepReport* report) {
  TrainingState& s = state_;
  at::Generator& rng = s.rng;
  // A permutation is drawn at the start of an epoch (or already at the end of the previous
  // one: the same RNG state, as nothing draws in between).
  if (!s.permutation.defined()) {
    s.permutation = at::randperm(n_events, rng, at::kLong);
    s.epoch_cursor = 0;
  }
  if (planned_epoch_ != s.epoch) RETURN_IF_ERROR(PlanEpoch());
  report->learning_rate = learning_rate();
  ApplyLearningRate(report->learning_rate);
  if (dropout_rng_.has_value()) {
    // One draw from the shared stream (all ranks alike), mixed with the rank.
    uint64_t base = 0;
    {
      std::lock_guard<std::mutex> lock(rng.mutex());
      base = rng.get<at::CPUGeneratorImpl>()->random64();
    }
    dropout_rng_->set_current_seed(base ^ (0x9E3779B97F4A7C15ULL * (options_.rank + 1)));
  }
  return absl::OkStatus();
}

at::Tensor Trainer::DrawSpots(const at::Tensor& expected) {
  if (!state_.config.generator_spots) return expected;
  uint64_t base = 0;
  {
    std::lock_guard<std::mutex> lock(state_.rng.mutex());
    base = state_.rng.get<at::CPUGeneratorImpl>()->random64();
  }
  spot_rng_.set_current_seed(base ^ (0xD1B54A32D192ED03ULL * (options_.rank + 1)));
  return state_.generator->DrawSpotsStraightThrough(expected, spot_rng_);
}

at::Tensor Trainer::LocalRows(const at::Tensor& t) const {
  if (options_.world_size == 1) return t;
  const int64_t offset = options_.rank * batch_size_;
  return t.slice(0, offset, offset + batch_size_);
}

at::Tensor Trainer::OnDevice(const at::Tensor& t) const {
  if (!t.defined() || t.device() == options_.device) return t;
  // Asynchronous from pinned memory (a prefetched batch); the step's first use waits for it on the
  // device's stream.
  return t.to(options_.device, /*non_blocking=*/t.is_pinned());
}

at::Tensor Trainer::SampleConditions(HeadLabels& labels) {
  const ModelConfig& c = state_.config;
  at::Generator& rng = state_.rng;
  const int64_t global = global_batch_size();
  // float32 normally; float64 when the models and data were converted (precise comparisons).
  const at::ScalarType dtype = source_->dtype();
  labels.energy100 =
      OnDevice(LocalRows(at::empty({global, 1}, dtype)
                             .uniform_(c.fake_energy_min_gev / c.energy_scale,
                                       c.fake_energy_max_gev / c.energy_scale, rng)));
  if (c.variable_angle()) {
    labels.theta = OnDevice(LocalRows(
        at::empty({global, 1}, dtype).uniform_(c.fake_theta_min_rad, c.fake_theta_max_rad, rng)));
  }
  labels.ecal = EcalTarget(c, labels.energy100);
  const at::Tensor noise =
      OnDevice(LocalRows(at::randn({global, state_.generator->noise_dim()}, rng, dtype)));
  return state_.generator->MakeInput(labels.energy100, labels.theta, noise);
}

at::Tensor Trainer::RealFakeLabels(double value) {
  const ModelConfig& c = state_.config;
  const at::ScalarType dtype = source_->dtype();
  at::Tensor labels = at::full({batch_size_, 1}, value, dtype);
  if (c.label_flip > 0) {
    const at::Tensor flip =
        LocalRows(at::empty({global_batch_size(), 1}, dtype).uniform_(0.0, 1.0, state_.rng))
            .lt(c.label_flip);
    labels = at::where(flip, 1.0 - labels, labels);
  }
  return OnDevice(labels);
}

at::Tensor Trainer::GenerateWithoutGrad(HeadLabels& fake) {
  // Generated batch for the discriminator update (no generator gradients needed).
  const at::Tensor input = SampleConditions(fake);
  torch::NoGradGuard no_grad;
  Bf16AutocastGuard autocast(options_.bf16_autocast);
  return DrawSpots(state_.generator->forward(input));
}

DiscriminatorOutput Trainer::Discriminate(const at::Tensor& images, const at::Tensor& energy100) {
  DiscriminatorOutput out;
  {
    Bf16AutocastGuard autocast(options_.bf16_autocast);
    out = state_.discriminator->forward(images, energy100);
  }
  if (options_.bf16_autocast) {  // the losses in float32
    for (at::Tensor* t : {&out.real_probability, &out.energy, &out.theta, &out.ecal}) {
      if (t->defined()) *t = t->to(at::kFloat);
    }
  }
  return out;
}

absl::StatusOr<at::Tensor> Trainer::NextRealBatch(HeadLabels& real, StepReport* report) {
  const TrainingState& s = state_;
  // This rank's slice of the permutation, as planned with the source, asked for as late as
  // possible (the generated batch gives a prefetching source time after an epoch start).
  const auto wait_start = std::chrono::steady_clock::now();
  absl::StatusOr<RealBatch> batch = source_->Next();
  report->data_wait_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  if (!batch.ok()) {
    return absl::Status(batch.status().code(),
                        absl::StrCat("reading the batch of step ", s.step + 1, " (epoch ",
                                     s.epoch + 1, "): ", batch.status().message()));
  }
  if (batch->images.size(0) != batch_size_) {
    return absl::InternalError(absl::StrCat("the batch source returned ", batch->images.size(0),
                                            " events for a batch of ", batch_size_));
  }
  const at::Tensor images = OnDevice(batch->images);
  real.energy100 = OnDevice(batch->energy100);
  real.ecal = OnDevice(batch->ecal);
  if (s.config.variable_angle()) real.theta = OnDevice(batch->theta);
  return images;
}

absl::Status Trainer::UpdateDiscriminator(const at::Tensor& images, const at::Tensor& generated,
                                          const HeadLabels& real, const HeadLabels& fake,
                                          StepReport* report) {
  TrainingState& s = state_;
  const ModelConfig& c = s.config;
  // One update on the real batch, one on the generated batch (Keras train_on_batch twice).
  s.discriminator_optimizer->zero_grad();
  LossTerms d_real = HeadLosses(c, Discriminate(images, real.energy100), real);
  d_real.total.backward();
  RETURN_IF_ERROR(RunHook(TrainPhase::kDiscriminatorReal, *s.discriminator));
  s.discriminator_optimizer->step();

  s.discriminator_optimizer->zero_grad();
  LossTerms d_fake = HeadLosses(c, Discriminate(generated, fake.energy100), fake);
  d_fake.total.backward();
  RETURN_IF_ERROR(RunHook(TrainPhase::kDiscriminatorFake, *s.discriminator));
  s.discriminator_optimizer->step();
  report->discriminator_real_loss = Values(d_real);
  report->discriminator_fake_loss = Values(d_fake);
  const double fake_ecal_loss = report->discriminator_fake_loss.back();
  // Empty generated images give exactly 100 (the reference tests equality; a loss above 100
  // only means oversized showers).
  if (std::abs(fake_ecal_loss - c.collapse_ecal_loss) < 1e-3) {
    return absl::AbortedError(absl::StrFormat(
        "generator collapsed to empty showers at step %d (epoch %d): fake ecal MAPE %.2f == "
        "%.0f; training aborted (try another seed or a lower learning rate)",
        s.step + 1, s.epoch + 1, fake_ecal_loss, c.collapse_ecal_loss));
  }
  return absl::OkStatus();
}

absl::Status Trainer::UpdateGenerator(const HeadLabels& real, StepReport* report) {
  TrainingState& s = state_;
  const ModelConfig& c = s.config;
  // The distribution form of the ecal loss compares with this step's real batch.
  const at::Tensor ecal_reference =
      c.ecal_loss_quantiles ? EcalReference(real.ecal, EcalTarget(c, real.energy100))
                            : at::Tensor();
  const std::vector<double> g_weights = GeneratorLossWeights(c);
  // Updates through the discriminator with its weights frozen and "real" labels.
  SetRequiresGrad(*s.discriminator, false);
  std::vector<double> g_sum;
  for (int64_t k = 0; k < c.generator_steps; ++k) {
    HeadLabels trick;
    const at::Tensor input = SampleConditions(trick);
    trick.real =
        at::ones({batch_size_, 1}, at::TensorOptions(source_->dtype()).device(options_.device));
    trick.ecal_reference = ecal_reference;
    s.generator_optimizer->zero_grad();
    at::Tensor expected;
    {
      Bf16AutocastGuard autocast(options_.bf16_autocast);
      expected = s.generator->forward(input);
    }
    // With spots the discriminator sees the drawn showers; the profile loss the expected ones.
    LossTerms g =
        HeadLosses(c, Discriminate(DrawSpots(expected), trick.energy100), trick, g_weights);
    if (options_.bf16_autocast) expected = expected.to(at::kFloat);  // for the profile loss
    if (c.profile_loss_weight > 0) {
      const ProfileLossTerm profile =
          ProfileLoss(c, expected, trick.energy100, options_.rank * batch_size_,
                      options_.world_size, options_.cross_rank_sum);
      g.total = g.total + c.profile_loss_weight * profile.loss;
      g.parts.push_back(profile.value);
    }
    g.total.backward();
    absl::Status st = RunHook(TrainPhase::kGenerator, *s.generator);
    if (!st.ok()) {
      SetRequiresGrad(*s.discriminator, true);
      return st;
    }
    s.generator_optimizer->step();
    Accumulate(g_sum, Values(g), 1.0 / static_cast<double>(c.generator_steps));
  }
  SetRequiresGrad(*s.discriminator, true);
  report->generator_loss = g_sum;
  return absl::OkStatus();
}

absl::Status Trainer::EndStep(int64_t n_events) {
  TrainingState& s = state_;
  const int64_t global = global_batch_size();
  s.step += 1;
  s.epoch_cursor += global;
  if (s.epoch_cursor / global >= steps_per_epoch_ || s.epoch_cursor + global > n_events) {
    s.epoch += 1;
    s.epoch_cursor = 0;
    s.permutation = at::Tensor();
    if (s.epoch < options_.epochs) {
      // The next epoch's order now, so a prefetching source reads on while this step returns.
      s.permutation = at::randperm(n_events, s.rng, at::kLong);
      RETURN_IF_ERROR(PlanEpoch());
    }
  }
  return absl::OkStatus();
}

void Trainer::FillThroughput(std::chrono::steady_clock::time_point start,
                             StepReport* report) const {
  report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report->samples_per_second = report->seconds > 0 ? batch_size_ / report->seconds : 0;
  report->global_samples_per_second =
      report->samples_per_second * static_cast<double>(options_.world_size);
  report->data_stall_fraction =
      report->seconds > 0 ? report->data_wait_seconds / report->seconds : 0;
}

absl::StatusOr<EpochReport> Trainer::RunEpoch() {
  EpochReport report;
  report.epoch = state_.epoch;
  const int64_t epoch = state_.epoch;
  double samples = 0;
  while (state_.epoch == epoch) {
    absl::StatusOr<StepReport> step = Step();
    if (!step.ok()) return step.status();
    ++report.steps;
    Accumulate(report.discriminator_loss, step->discriminator_real_loss, 0.5);
    Accumulate(report.discriminator_loss, step->discriminator_fake_loss, 0.5);
    Accumulate(report.generator_loss, step->generator_loss, 1.0);
    report.seconds += step->seconds;
    report.data_wait_seconds += step->data_wait_seconds;
    samples += step->samples_per_second * step->seconds;
  }
  for (double& v : report.discriminator_loss) v /= report.steps;
  for (double& v : report.generator_loss) v /= report.steps;
  report.samples_per_second = report.seconds > 0 ? samples / report.seconds : 0;
  report.global_samples_per_second = report.samples_per_second * options_.world_size;
  report.data_stall_fraction = report.seconds > 0 ? report.data_wait_seconds / report.seconds : 0;
  if (epoch_callback_) epoch_callback_(report);
  return report;
}

absl::Status Trainer::Train() {
  while (state_.epoch < options_.epochs) {
    absl::StatusOr<EpochReport> epoch = RunEpoch();
    if (!epoch.ok()) return epoch.status();
  }
  return absl::OkStatus();
}

absl::Status Trainer::SaveCheckpoint(const std::string& path) const {
  return WriteCheckpoint(path, state_);
}

}  // namespace gantry::gan
