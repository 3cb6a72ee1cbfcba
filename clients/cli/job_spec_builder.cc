#include "clients/cli/job_spec_builder.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "clients/cli/format.h"
#include "jobspec/presets.h"

namespace gantry::cli {
namespace {

// Applies `--flag` (when given) through `apply`, which receives the raw text.
template <typename Apply>
absl::Status IfGiven(const ParsedArgs& args, const std::string& flag, Apply apply) {
  std::optional<std::string> value = args.Get(flag);
  if (!value.has_value()) return absl::OkStatus();
  return apply(*value);
}

// Wraps an enum parse error as a usage error naming the flag.
template <typename T>
absl::StatusOr<T> FlagEnum(const std::string& flag, absl::StatusOr<T> parsed) {
  if (!parsed.ok()) return UsageError(absl::StrCat("--", flag, ": ", parsed.status().message()));
  return parsed;
}

}  // namespace

std::vector<FlagSpec> JobSpecFlags() {
  return {
      {"spec", "FILE", "JobSpec as protobuf JSON; flags below override its fields"},
      {"name", "TEXT", "display name (also the default model name)"},
      {"preset", "NAME",
       absl::StrCat(absl::StrJoin(jobspec::JobPresetNames(), ", "),
                    " (baseline-*: the no-network baselines)")},
      {"dataset", "REF",
       "ds-<id> or an uploaded dataset's name, toymc:<key=value,...> or file:///path.h5"},
      {"epochs", "N", "training epochs (1..10000)"},
      {"batch", "N", "batch size per rank (1..4096)"},
      {"lr", "X", "learning rate (> 0)"},
      {"optimizer", "NAME", "rmsprop (the only one the trainer implements)"},
      {"precision", "P", "fp32 (default) or bf16-autocast (GPU ranks: --device gpu)"},
      {"world-size", "N", "number of data-parallel ranks (1..256)"},
      {"device", "KIND", "cpu or gpu"},
      {"gpus", "N", "GPUs per rank"},
      {"threads", "N", "intra-op threads per rank (0 = worker default)"},
      {"label", "K=V", "job label", true},
      {"selector", "K=V", "worker label the job needs, e.g. zone=a", true},
      {"pool", "NAME", "run in this pool (default: the cheapest eligible one, if pools exist)"},
      {"allow-preemptible", "", "gantry may choose a preemptible pool"},
      {"priority", "N", "higher runs first (-100..100)"},
      {"seed", "N", "random seed (0 = chosen by the server)"},
      {"model-name", "NAME", "register the trained model under this name"},
      {"visibility", "V", "of the registered model: private or public"},
      {"from-model", "REF", "fine-tune from name:version or name@alias"},
      {"checkpoint-every", "N", "save a checkpoint every N epochs (0 = off)"},
      {"checkpoint-every-steps", "N", "save a checkpoint every N training steps (0 = off)"},
      {"checkpoint-every-minutes", "X", "save a checkpoint every X minutes of training (0 = off)"},
      {"keep-last", "N", "checkpoints the server keeps per job (0 = 1)"},
      {"keep-best", "",
       "also keep the lowest-fom checkpoint (validates the start and each checkpoint)"},
      {"best-metric", "KEY",
       "the validation metric --keep-best minimises (default fom; e.g. sep_mean)"},
      {"register-best", "", "register the kept best checkpoint, not the last (needs --keep-best)"},
      {"max-restarts", "N", "restarts from the latest checkpoint after a failure (0..100)"},
      {"no-validation", "", "skip the physics validation at the end"},
      {"leave-out", "C:H",
       "train without the energies C-H..C+H GeV and score the model there (e.g. 100:20)"},
  };
}

namespace {

// Calls `setter` with the integer value of `flag` when it is given; a usage error names it.
template <typename Setter>
absl::Status IntFlag(const ParsedArgs& args, const std::string& flag, Setter setter) {
  return IfGiven(args, flag, [&](const std::string& text) -> absl::Status {
    ASSIGN_OR_RETURN(int value, ParseIntFlag(flag, text));
    setter(value);
    return absl::OkStatus();
  });
}

// --spec FILE: the protobuf JSON of a JobSpec, every field known.
absl::Status ReadSpecFile(const ParsedArgs& args, const FileReader& read_file, v1::JobSpec* spec) {
  if (std::optional<std::string> path = args.Get("spec"); path.has_value()) {
    absl::StatusOr<std::string> contents = read_file(*path);
    if (!contents.ok()) {
      return UsageError(absl::StrCat("--spec: ", contents.status().message()));
    }
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    auto status = google::protobuf::util::JsonStringToMessage(*contents, spec, options);
    if (!status.ok()) {
      return UsageError(absl::StrCat(
          "--spec ", *path, ": not a valid JobSpec JSON: ", std::string(status.message())));
    }
  }
  return absl::OkStatus();
}

// What to train on and how: name, preset, dataset, epochs, batch, learning rate, optimizer,
// precision.
absl::Status ApplyTrainingFlags(const ParsedArgs& args, v1::JobSpec* spec) {
  RETURN_IF_ERROR(IfGiven(args, "name", [&](const std::string& v) {
    spec->set_display_name(v);
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(IfGiven(args, "preset", [&](const std::string& v) {
    spec->set_model_preset(v);
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(IfGiven(args, "dataset", [&](const std::string& v) {
    spec->set_dataset(v);
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(
      IntFlag(args, "epochs", [&](int v) { spec->mutable_hyper_parameters()->set_epochs(v); }));
  RETURN_IF_ERROR(IntFlag(args, "batch",
                          [&](int v) { spec->mutable_hyper_parameters()->set_batch_per_rank(v); }));
  RETURN_IF_ERROR(IfGiven(args, "lr", [&](const std::string& text) -> absl::Status {
    ASSIGN_OR_RETURN(double value, ParseDoubleFlag("lr", text));
    if (value <= 0) return UsageError(absl::StrCat("--lr: must be > 0, got ", text));
    spec->mutable_hyper_parameters()->set_learning_rate(value);
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(IfGiven(args, "optimizer", [&](const std::string& v) {
    spec->mutable_hyper_parameters()->set_optimizer(v);
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(IfGiven(args, "precision", [&](const std::string& text) -> absl::Status {
    ASSIGN_OR_RETURN(v1::TrainingPrecision precision,
                     FlagEnum("precision", ParseTrainingPrecision(text)));
    spec->mutable_hyper_parameters()->set_precision(precision);
    return absl::OkStatus();
  }));
  return absl::OkStatus();
}

// Where the ranks run: world size, device, GPUs, threads, labels, selectors, pool, preemption,
// priority.
absl::Status ApplyPlacementFlags(const ParsedArgs& args, v1::JobSpec* spec) {
  RETURN_IF_ERROR(IntFlag(args, "world-size", [&](int v) { spec->set_world_size(v); }));
  RETURN_IF_ERROR(IfGiven(args, "device", [&](const std::string& text) -> absl::Status {
    ASSIGN_OR_RETURN(v1::DeviceKind device, FlagEnum("device", ParseDevice(text)));
    spec->mutable_resources_per_rank()->set_device(device);
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(
      IntFlag(args, "gpus", [&](int v) { spec->mutable_resources_per_rank()->set_count(v); }));
  RETURN_IF_ERROR(
      IntFlag(args, "threads", [&](int v) { spec->mutable_resources_per_rank()->set_threads(v); }));
  for (const std::string& text : args.GetAll("label")) {
    ASSIGN_OR_RETURN(auto pair, ParseKeyValueFlag("label", text));
    (*spec->mutable_labels())[pair.first] = pair.second;
  }
  for (const std::string& text : args.GetAll("selector")) {
    ASSIGN_OR_RETURN(auto pair, ParseKeyValueFlag("selector", text));
    (*spec->mutable_worker_selector())[pair.first] = pair.second;
  }
  RETURN_IF_ERROR(IfGiven(args, "pool", [&](const std::string& v) {
    spec->set_pool(v);
    return absl::OkStatus();
  }));
  if (args.Has("allow-preemptible")) spec->set_allow_preemptible(true);
  RETURN_IF_ERROR(IntFlag(args, "priority", [&](int v) { spec->set_priority(v); }));
  return absl::OkStatus();
}

// The seed, the model the job registers (name, visibility) and the one it starts from.
absl::Status ApplyModelFlags(const ParsedArgs& args, v1::JobSpec* spec) {
  RETURN_IF_ERROR(IfGiven(args, "seed", [&](const std::string& text) -> absl::Status {
    ASSIGN_OR_RETURN(uint64_t seed, ParseUint64Flag("seed", text));
    spec->mutable_hyper_parameters()->set_seed(seed);
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(IfGiven(args, "model-name", [&](const std::string& v) {
    spec->set_model_name(v);
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(IfGiven(args, "visibility", [&](const std::string& text) -> absl::Status {
    ASSIGN_OR_RETURN(v1::Visibility visibility, FlagEnum("visibility", ParseVisibility(text)));
    spec->set_model_visibility(visibility);
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(IfGiven(args, "from-model", [&](const std::string& v) {
    spec->set_initial_model(v);
    return absl::OkStatus();
  }));
  return absl::OkStatus();
}

// Checkpoint policy and restarts.
absl::Status ApplyCheckpointFlags(const ParsedArgs& args, v1::JobSpec* spec) {
  RETURN_IF_ERROR(IntFlag(args, "checkpoint-every",
                          [&](int v) { spec->mutable_checkpoint_policy()->set_every_epochs(v); }));
  RETURN_IF_ERROR(IntFlag(args, "checkpoint-every-steps",
                          [&](int v) { spec->mutable_checkpoint_policy()->set_every_steps(v); }));
  RETURN_IF_ERROR(IfGiven(args, "checkpoint-every-minutes", [&](const std::string& text) {
    double minutes = 0;
    if (!absl::SimpleAtod(text, &minutes) || !(minutes >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("--checkpoint-every-minutes: \"", text,
                                                     "\" is not a number of minutes >= 0"));
    }
    spec->mutable_checkpoint_policy()->set_every_minutes(minutes);
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(IntFlag(args, "keep-last",
                          [&](int v) { spec->mutable_checkpoint_policy()->set_keep_last(v); }));
  RETURN_IF_ERROR(IntFlag(args, "max-restarts", [&](int v) { spec->set_max_restarts(v); }));
  if (args.Has("keep-best")) spec->mutable_checkpoint_policy()->set_keep_best(true);
  if (std::optional<std::string> key = args.Get("best-metric"); key.has_value()) {
    spec->mutable_checkpoint_policy()->set_best_metric(*key);  // the server checks the name
  }
  if (args.Has("register-best")) spec->mutable_checkpoint_policy()->set_register_best(true);
  return absl::OkStatus();
}

// Validation: off, or with an energy band left out.
absl::Status ApplyValidationFlags(const ParsedArgs& args, v1::JobSpec* spec) {
  if (args.Has("no-validation")) spec->mutable_validation()->set_disabled(true);
  RETURN_IF_ERROR(IfGiven(args, "leave-out", [&](const std::string& text) {
    const std::vector<std::string> parts = absl::StrSplit(text, ':');
    double centre = 0, half = 0;
    if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &centre) ||
        !absl::SimpleAtod(parts[1], &half) || !(half > 0) || !(centre - half > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--leave-out: \"", text,
                       "\" is not CENTRE:HALF_WIDTH in GeV with a width > 0 and positive energies, "
                       "e.g. 100:20"));
    }
    spec->mutable_validation()->mutable_leave_out()->set_centre_gev(centre);
    spec->mutable_validation()->mutable_leave_out()->set_half_width_gev(half);
    return absl::OkStatus();
  }));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::JobSpec> BuildJobSpec(const ParsedArgs& args, const FileReader& read_file) {
  v1::JobSpec spec;
  RETURN_IF_ERROR(ReadSpecFile(args, read_file, &spec));
  RETURN_IF_ERROR(ApplyTrainingFlags(args, &spec));
  RETURN_IF_ERROR(ApplyPlacementFlags(args, &spec));
  RETURN_IF_ERROR(ApplyModelFlags(args, &spec));
  RETURN_IF_ERROR(ApplyCheckpointFlags(args, &spec));
  RETURN_IF_ERROR(ApplyValidationFlags(args, &spec));
  // Keep the spec minimal: drop sub-messages that no flag or file touched.
  if (spec.hyper_parameters().ByteSizeLong() == 0) spec.clear_hyper_parameters();
  if (spec.resources_per_rank().ByteSizeLong() == 0) spec.clear_resources_per_rank();
  return spec;
}

}  // namespace gantry::cli
