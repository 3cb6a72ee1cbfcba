// Trainer: the reference 3DGAN training loop (per iteration: discriminator on a real batch, on a
// generated batch, then two generator updates through the frozen discriminator), deterministic on
// CPU for a given seed and thread count, with hooks for progress and gradient all-reduce, and the
// sharding, synchronised BatchNorm and learning-rate schedule of synchronous data parallelism.
#ifndef GANTRY_WORKERS_GAN_TRAINER_H_
#define GANTRY_WORKERS_GAN_TRAINER_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/Optional.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "showers/shower_set.h"
#include "workers/gan/batch_source.h"
#include "workers/gan/checkpoint.h"
#include "workers/gan/discriminator.h"
#include "jobspec/model_config.h"
#include "workers/gan/preprocessing.h"

namespace gantry::gan {

struct HeadLabels;  // workers/gan/losses.h

struct TrainerOptions {
  int64_t batch_size = 0;  // 0: the preset's default batch
  uint64_t seed = 1;       // initial weights and every random draw
  int64_t epochs = 1;      // Train() runs until this many epochs are complete
  // Intra-op threads (at::set_num_threads, process-wide); 0 leaves the current setting.
  int threads = 0;
  // Where the networks, optimiser state and batches live (workers/gan/device.h has the policy: the
  // random draws stay on the CPU generator and are copied over). A device this build or machine
  // lacks is FAILED_PRECONDITION at creation.
  c10::Device device = c10::Device(c10::kCPU);
  // GPU only: the networks' forward passes under bfloat16 autocast (Bf16AutocastGuard), the
  // losses in float32 on float32 copies of the outputs; parameters, gradients and optimiser state
  // stay float32, checkpoints are unchanged. FAILED_PRECONDITION at creation on a CPU device or a
  // GPU without bfloat16 (Bf16Support).
  bool bf16_autocast = false;
  // 0: an epoch is floor(events / batch) iterations (as the reference); otherwise at most this many
  // (tests and benchmarks bound the work).
  int64_t max_steps_per_epoch = 0;

  // Synchronous data parallelism (workers/distributed drives it; docs/MODELS.md "Data-parallel
  // training"). Every rank sees the same events (its BatchSource reads only its own batches) and
  // seed, draws the global random quantities of each step (epoch permutation, fake conditions,
  // noise, label flips for batch_size * world_size samples) and uses its slice [rank * b, (rank +
  // 1) * b), so the ranks together compute what one process computes with the global batch.
  // Data-parallel ranks; batch_size is per rank, the global batch is batch_size * world_size.
  int world_size = 1;
  int rank = 0;
  bool scale_lr_with_world_size = false;  // linear scaling rule: lr = config lr * world_size ...
  // ... reached linearly from config lr over this many epochs (Goyal et al.).
  int64_t warmup_epochs = 0;
  // Cosine decay over `epochs`: the learning rate is multiplied by
  // f + (1 - f) (1 + cos(pi t)) / 2 with t the fraction of the run done and f = lr_decay_to;
  // 1 = constant (the reference). Lets a short run settle the generator's total energy.
  double lr_decay_to = 1.0;
  // In-place sum of a tensor across ranks (set by DataParallel); used by synchronised BatchNorm.
  std::function<void(at::Tensor&)> cross_rank_sum;
};

// The learning rate of the step that starts at `step_in_epoch` (0-based) of `epoch` (0-based):
// target = base_lr * world_size when scale_lr_with_world_size, else base_lr; with warmup_epochs
// > 0 it grows linearly from base_lr, reaching the target at the start of epoch warmup_epochs:
// lr = base + (target - base) * min(1, (epoch + step_in_epoch / steps_per_epoch) / warmup_epochs).
double ScheduledLearningRate(double base_lr, const TrainerOptions& options, int64_t epoch,
                             int64_t step_in_epoch, int64_t steps_per_epoch);

// Loss vectors are [total, part...] with parts in HeadLosses order; the generator's end with the
// profile loss when ModelConfig::profile_loss_weight > 0.
struct StepReport {
  int64_t epoch = 0;  // 0-based epoch the step belongs to
  int64_t step = 0;   // iterations completed so far, this one included
  std::vector<double> discriminator_real_loss;
  std::vector<double> discriminator_fake_loss;
  std::vector<double> generator_loss;  // mean over the generator updates
  double seconds = 0;
  double samples_per_second = 0;         // real samples of this rank's batch / seconds
  double global_samples_per_second = 0;  // samples of the global batch (all ranks) / seconds
  double learning_rate = 0;              // the scheduled rate this step used
  // Time this step waited for its real batch (BatchSource::Next), and that time / seconds.
  double data_wait_seconds = 0;
  double data_stall_fraction = 0;
};

struct EpochReport {
  int64_t epoch = 0;  // 0-based
  int64_t steps = 0;
  std::vector<double> discriminator_loss;  // mean of real and fake, averaged over the epoch
  std::vector<double> generator_loss;
  double seconds = 0;
  double samples_per_second = 0;         // this rank
  double global_samples_per_second = 0;  // all ranks
  double data_wait_seconds = 0;          // summed over the steps
  double data_stall_fraction = 0;        // data_wait_seconds / seconds
};

// Which update's gradients are ready.
enum class TrainPhase { kDiscriminatorReal, kDiscriminatorFake, kGenerator };

class Trainer {
 public:
  // Called after backward, before the optimiser step; the gradients of `model`'s parameters are
  // ready (data-parallel training all-reduces them here). A non-OK status aborts the step.
  using GradientHook = std::function<absl::Status(TrainPhase phase, torch::nn::Module& model)>;
  using StepCallback = std::function<void(const StepReport&)>;
  using EpochCallback = std::function<void(const EpochReport&)>;

  // Fresh models. `showers` are raw GeV showers; they are preprocessed here (PreprocessShowers).
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const ModelConfig& config,
                                                         const showers::ShowerSet& showers,
                                                         const TrainerOptions& options);
  // Fresh models trained on batches from `source` (e.g. a PrefetchingBatchSource reading a file).
  static absl::StatusOr<std::unique_ptr<Trainer>> CreateWithSource(
      const ModelConfig& config, std::unique_ptr<BatchSource> source,
      const TrainerOptions& options);
  // Continues from a checkpoint; options.seed is ignored (the checkpoint's RNG state is used).
  static absl::StatusOr<std::unique_ptr<Trainer>> Resume(const std::string& checkpoint_path,
                                                         const showers::ShowerSet& showers,
                                                         const TrainerOptions& options);
  // As Create, from already preprocessed tensors. Training runs in the tensors' dtype: float32 as
  // produced by PreprocessShowers, or float64 when both networks were converted too (tests).
  static absl::StatusOr<std::unique_ptr<Trainer>> CreateFromTensors(TrainingState state,
                                                                    TrainingTensors data,
                                                                    const TrainerOptions& options);
  // The general form: a training state (fresh or from a checkpoint) and a batch source. At each
  // epoch start the Trainer draws the permutation (as always, from the shared RNG) and plans this
  // rank's batches of the epoch with the source; the next epoch's permutation is drawn as soon as
  // an epoch ends (while epochs remain), so a prefetching source reads across the boundary.
  static absl::StatusOr<std::unique_ptr<Trainer>> CreateFromSource(
      TrainingState state, std::unique_ptr<BatchSource> source, const TrainerOptions& options);

  // One iteration on the next batch (starting a new epoch when needed). ABORTED when the
  // generator collapsed (fake ecal loss reached config.collapse_ecal_loss).
  absl::StatusOr<StepReport> Step();
  // The rest of the current epoch.
  absl::StatusOr<EpochReport> RunEpoch();
  // Epochs until options.epochs are complete.
  absl::Status Train();

  absl::Status SaveCheckpoint(const std::string& path) const;

  void set_gradient_hook(GradientHook hook) { gradient_hook_ = std::move(hook); }
  void set_step_callback(StepCallback callback) { step_callback_ = std::move(callback); }
  void set_epoch_callback(EpochCallback callback) { epoch_callback_ = std::move(callback); }
  // Installs (or, with an empty function, removes) the cross-rank sum used by every BatchNorm of
  // both networks in training mode (SyncBatchNorm). Same as TrainerOptions::cross_rank_sum.
  void set_cross_rank_sum(std::function<void(at::Tensor&)> sum);

  const TrainingState& state() const { return state_; }
  TrainingState& mutable_state() { return state_; }
  const ModelConfig& config() const { return state_.config; }
  const TrainerOptions& options() const { return options_; }
  int64_t batch_size() const { return batch_size_; }  // per rank
  int64_t global_batch_size() const { return batch_size_ * options_.world_size; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  // The learning rate the next Step() will use.
  double learning_rate() const;
  int64_t events() const { return source_->events(); }
  const BatchSource& batch_source() const { return *source_; }

 private:
  Trainer(TrainingState state, std::unique_ptr<BatchSource> source, const TrainerOptions& options);

  absl::Status RunHook(TrainPhase phase, torch::nn::Module& model);
  // The phases of Step, in their order (which is the order of the random draws).
  absl::Status BeginStep(int64_t n_events, StepReport* report);
  absl::Status UpdateDiscriminator(const at::Tensor& images, const at::Tensor& generated,
                                   const HeadLabels& real, const HeadLabels& fake,
                                   StepReport* report);
  absl::Status UpdateGenerator(const HeadLabels& real, StepReport* report);
  // Advances the cursor; at an epoch's end draws the next epoch's permutation and plans it.
  absl::Status EndStep(int64_t n_events);
  at::Tensor GenerateWithoutGrad(HeadLabels& fake);
  // ModelConfig::generator_spots: the spots of `expected` (GeneratorImpl::DrawSpotsStraightThrough)
  // from this rank's spot stream, seeded per draw from one number of the shared stream and the
  // rank: every rank's shared stream advances alike (at::poisson takes a data-dependent number of
  // draws), a resume continues bit for bit, and the ranks' spots are their own. `expected` without
  // spots.
  at::Tensor DrawSpots(const at::Tensor& expected);
  // The discriminator's forward pass (under bf16 autocast when asked, outputs then float32).
  DiscriminatorOutput Discriminate(const at::Tensor& images, const at::Tensor& energy100);
  absl::StatusOr<at::Tensor> NextRealBatch(HeadLabels& real, StepReport* report);
  // Conditions and generator input for this rank's rows of a batch drawn for the global batch.
  at::Tensor SampleConditions(HeadLabels& labels);
  // Real (1) or fake (0) labels, flipped with probability label_flip.
  at::Tensor RealFakeLabels(double value);
  // This rank's rows of a quantity drawn for the global batch.
  at::Tensor LocalRows(const at::Tensor& t) const;
  // `t` (drawn or read on the CPU) on the training device.
  at::Tensor OnDevice(const at::Tensor& t) const;
  void FillThroughput(std::chrono::steady_clock::time_point start, StepReport* report) const;
  void ApplyLearningRate(double lr);
  // Hands the source this rank's batches of the current epoch from the cursor on.
  absl::Status PlanEpoch();

  TrainingState state_;
  std::unique_ptr<BatchSource> source_;
  int64_t planned_epoch_ = -1;  // the epoch whose batches the source has been given
  TrainerOptions options_;
  int64_t batch_size_ = 0;
  int64_t steps_per_epoch_ = 0;
  GradientHook gradient_hook_;
  StepCallback step_callback_;
  EpochCallback epoch_callback_;
  // Dropout masks of a multi-rank or non-CPU run: a rank-local stream (on the training device)
  // reseeded every step from the shared RNG (decorrelated across ranks, still reproducible and
  // resumable). Unused with one CPU rank, which draws its masks from the shared RNG itself.
  c10::optional<at::Generator> dropout_rng_;
  // Spot draws (DrawSpots): reseeded before each.
  at::Generator spot_rng_;
};

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_TRAINER_H_
