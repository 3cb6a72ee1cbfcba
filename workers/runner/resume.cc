#include "workers/runner/resume.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "workers/gan/checkpoint.h"

namespace gantry::runner {

absl::Status CheckCheckpointFitsJob(const gan::TrainingState& state, const gan::ModelConfig& model,
                                    uint64_t seed) {
  if (state.config.architecture != model.architecture) {
    return absl::InvalidArgumentError(absl::StrCat("the checkpoint holds a ", state.config.preset,
                                                   " model, the job trains ", model.preset));
  }
  const std::string have = gan::SerializeModelConfig(state.config);
  const std::string want = gan::SerializeModelConfig(model);
  if (have != want) {
    const std::vector<std::string> a = absl::StrSplit(have, '\n');
    const std::vector<std::string> b = absl::StrSplit(want, '\n');
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      const std::string x = i < a.size() ? a[i] : "(none)";
      const std::string y = i < b.size() ? b[i] : "(none)";
      if (x != y) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the checkpoint's model config differs from the job's: \"", x, "\" vs \"", y, "\""));
      }
    }
  }
  if (state.seed != seed) {
    return absl::InvalidArgumentError(absl::StrCat("the checkpoint was trained with seed ",
                                                   state.seed, ", the job has seed ", seed));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<gan::Trainer>> ResumeTrainer(
    const std::string& path, const gan::ModelConfig& model,
    std::unique_ptr<gan::BatchSource> batches, const gan::TrainerOptions& options) {
  ASSIGN_OR_RETURN(gan::TrainingState state, gan::ReadCheckpoint(path, /*load_optimizers=*/true));
  RETURN_IF_ERROR(CheckCheckpointFitsJob(state, model, options.seed));
  return gan::Trainer::CreateFromSource(std::move(state), std::move(batches), options);
}

}  // namespace gantry::runner
