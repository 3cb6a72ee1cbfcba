#include "workers/runner/rank_model.h"

#include <torch/torch.h>

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "workers/gan/checkpoint.h"
#include "workers/runner/checkpoint_client.h"
#include "workers/runner/checkpoint_verifier.h"
#include "workers/runner/resume.h"

namespace gantry::runner {
namespace {

namespace fs = std::filesystem;

// Copies parameters and buffers by name (fine-tuning from a checkpoint's weights), except `skip`.
absl::Status CopyWeights(torch::nn::Module& from, torch::nn::Module& to, const std::string& what,
                         const std::string& skip = "") {
  torch::NoGradGuard no_grad;
  auto copy = [&](const torch::OrderedDict<std::string, at::Tensor>& src,
                  torch::OrderedDict<std::string, at::Tensor> dst) -> absl::Status {
    const size_t skipped_src = src.contains(skip) ? 1 : 0;
    const size_t skipped_dst = dst.contains(skip) ? 1 : 0;
    if (src.size() - skipped_src != dst.size() - skipped_dst) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the initial checkpoint has ", src.size() - skipped_src,
                       " tensors, the model ", dst.size() - skipped_dst));
    }
    for (const auto& item : src) {
      if (item.key() == skip) continue;
      at::Tensor* target = dst.find(item.key());
      if (target == nullptr || !target->sizes().equals(item.value().sizes())) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": the initial checkpoint's ",
                                                       item.key(), " does not fit the model"));
      }
      target->copy_(item.value());
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(copy(from.named_parameters(), to.named_parameters()));
  return copy(from.named_buffers(), to.named_buffers());
}

// Fine-tuning: the generator's weights, and of its shower template a, b and the modes both
// models have (the job's further modes stay as fitted to its data).
absl::Status CopyGeneratorWeights(gan::GeneratorImpl& from, gan::GeneratorImpl& to) {
  const bool from_template = from.shower_template().defined();
  const bool to_template = to.shower_template().defined();
  if (from_template != to_template) {
    return absl::InvalidArgumentError(
        from_template ? "generator: the initial model has a shower template and the job's preset "
                        "has none: fine-tune it with a preset that has one (tiny-template)"
                      : "generator: the job's preset has a shower template and the initial model "
                        "has none: fine-tune it with a preset without one");
  }
  RETURN_IF_ERROR(CopyWeights(from, to, "generator", "shower_template"));
  if (!to_template) return absl::OkStatus();
  absl::Status adopted = to.AdoptShowerTemplate(from.shower_template());
  if (!adopted.ok())
    return absl::InvalidArgumentError(absl::StrCat("generator: ", adopted.message()));
  return absl::OkStatus();
}

// Fetches checkpoint `sha256` from the server into the work dir as `file_name`; errors name
// `field`.
absl::StatusOr<std::string> FetchCheckpoint(const RankRunnerOptions& options,
                                            const std::string& field, const std::string& sha256,
                                            const std::string& file_name) {
  std::error_code ec;
  fs::create_directories(options.work_dir, ec);
  CheckpointClient client(options.server, options.token, absl::Minutes(10),
                          ChannelCredentialsFor(options.tls));
  const std::string path = (fs::path(options.work_dir) / file_name).string();
  absl::StatusOr<UploadedCheckpoint> fetched = client.Fetch(sha256, path);
  if (!fetched.ok()) {
    return absl::Status(fetched.status().code(),
                        absl::StrCat(field, " ", sha256, ": ", fetched.status().message()));
  }
  return path;
}

}  // namespace

gan::TrainerOptions TrainerOptionsFor(const RankPlan& plan, const RankRunnerOptions& options) {
  gan::TrainerOptions trainer;
  trainer.batch_size = plan.batch_per_rank;
  trainer.seed = plan.seed;
  trainer.epochs = plan.epochs;
  trainer.threads = plan.threads;
  trainer.device = options.device;
  trainer.max_steps_per_epoch = options.max_steps_per_epoch;
  trainer.world_size = plan.assignment.world_size();
  trainer.rank = plan.assignment.rank();
  trainer.scale_lr_with_world_size = plan.scale_lr_with_world_size;
  trainer.warmup_epochs = plan.warmup_epochs;
  trainer.lr_decay_to = plan.lr_decay_to;
  trainer.bf16_autocast = plan.bf16_autocast;
  return trainer;
}

absl::StatusOr<std::unique_ptr<gan::Trainer>> BuildRankTrainer(const RankPlan& plan,
                                                               const RankRunnerOptions& options,
                                                               TrainingInput input,
                                                               const RankLog& log) {
  const gan::TrainerOptions trainer_options = TrainerOptionsFor(plan, options);
  const std::string& resume = plan.assignment.resume_checkpoint_sha256();
  if (!resume.empty()) {
    // A restart: weights, optimisers, RNG, counters and the epoch's order continue exactly.
    ASSIGN_OR_RETURN(const std::string path,
                     FetchCheckpoint(options, "resume_checkpoint_sha256", resume, "resume.ckpt"));
    RETURN_IF_ERROR(VerifyCheckpointInChild(path, absl::StrCat("resume_checkpoint_sha256 ", resume),
                                            options.verify_checkpoints));
    absl::StatusOr<std::unique_ptr<gan::Trainer>> trainer =
        ResumeTrainer(path, input.model, std::move(input.batches), trainer_options);
    if (!trainer.ok()) {
      return absl::Status(trainer.status().code(), absl::StrCat("resume_checkpoint_sha256 ", resume,
                                                                ": ", trainer.status().message()));
    }
    log("INFO", absl::StrFormat("resumed from checkpoint %s (epoch %d, step %d)", resume,
                                (*trainer)->state().epoch, (*trainer)->state().step));
    return trainer;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<gan::Trainer> trainer,
                   gan::Trainer::CreateWithSource(input.model, std::move(input.batches), trainer_options));
  if (input.model.generator_template) {
    // The template fitted to the training events (every rank fits the same one).
    RETURN_IF_ERROR(trainer->mutable_state().generator->SetShowerTemplate(input.shower_template));
  }
  const std::string& initial = plan.assignment.initial_checkpoint_sha256();
  if (!initial.empty()) {
    // Fine-tuning: the initial model's weights, fresh optimisers and counters.
    ASSIGN_OR_RETURN(const std::string path,
                     FetchCheckpoint(options, "initial_checkpoint_sha256", initial, "initial.ckpt"));
    RETURN_IF_ERROR(VerifyCheckpointInChild(
        path, absl::StrCat("initial_checkpoint_sha256 ", initial), options.verify_checkpoints));
    ASSIGN_OR_RETURN(gan::TrainingState loaded, gan::ReadCheckpoint(path, false));
    if (loaded.config.architecture != plan.model.architecture) {
      return absl::InvalidArgumentError(
          absl::StrCat("initial_checkpoint_sha256 ", initial, ": the initial model is a ",
                       loaded.config.preset, " model, the job trains ", plan.model.preset));
    }
    gan::TrainingState& state = trainer->mutable_state();
    RETURN_IF_ERROR(CopyGeneratorWeights(*loaded.generator, *state.generator));
    RETURN_IF_ERROR(CopyWeights(*loaded.discriminator, *state.discriminator, "discriminator"));
    log("INFO", absl::StrCat("fine-tuning from checkpoint ", initial));
  }
  return trainer;
}

}  // namespace gantry::runner
