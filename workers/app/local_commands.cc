#include "workers/app/local_commands.h"

#include <ATen/Parallel.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/atomic_file.h"
#include "jobspec/export_profile.h"
#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"
#include "workers/baseline/baseline_checkpoint.h"
#include "workers/export/model_export.h"
#include "workers/gan/checkpoint.h"
#include "workers/gan/checkpoint_diff.h"
#include "workers/gan/checkpoint_envelope.h"
#include "workers/gan/condition_fit.h"
#include "workers/gan/shower_generator.h"
#include "workers/gan/trainer.h"
#include "workers/runner/checkpoint_verifier.h"

namespace gantry::app {
namespace {

namespace v1 = ::gantry::v1;

absl::StatusOr<showers::ShowerSet> LoadData(const std::string& source, int threads) {
  if (source.empty())
    return absl::InvalidArgumentError("--data is required (toymc:... or a .h5 file)");
  if (absl::StartsWith(source, "toymc:")) {
    absl::StatusOr<showers::ToyMcConfig> config = showers::ParseToyMcSpec(source);
    if (!config.ok()) return config.status();
    config->threads = std::max(config->threads, threads);
    return showers::SimulateToyMc(*config);
  }
  return showers::ReadShowerFile(source);
}

std::string Losses(const std::vector<double>& v, bool variable_angle) {
  if (v.empty()) return "-";
  if (variable_angle && v.size() == 5) {
    return absl::StrFormat("%.4f (bce %.4f E %.3f theta %.4f ecal %.3f)", v[0], v[1], v[2], v[3],
                           v[4]);
  }
  if (variable_angle && v.size() == 6) {
    return absl::StrFormat("%.4f (bce %.4f E %.3f theta %.4f ecal %.3f profile %.3f)", v[0], v[1],
                           v[2], v[3], v[4], v[5]);
  }
  if (v.size() == 4)
    return absl::StrFormat("%.4f (bce %.4f E %.3f ecal %.3f)", v[0], v[1], v[2], v[3]);
  if (v.size() == 5) {
    return absl::StrFormat("%.4f (bce %.4f E %.3f ecal %.3f profile %.3f)", v[0], v[1], v[2], v[3],
                           v[4]);
  }
  return absl::StrJoin(v, " ");
}

}  // namespace

absl::Status RunLocalTrain(const LocalTrainOptions& o, std::ostream& log) {
  if (o.out.empty()) return absl::InvalidArgumentError("--out (checkpoint path) is required");
  if (o.epochs < 1) return absl::InvalidArgumentError("--epochs must be >= 1");
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<showers::ShowerSet> showers = LoadData(o.data, o.threads);
  if (!showers.ok()) return showers.status();
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log << "data: " << showers->events() << " events " << showers->shape[0] << "x"
      << showers->shape[1] << "x" << showers->shape[2] << " from " << o.data << " ("
      << absl::StrFormat("%.1f", load_seconds) << " s)\n";

  gan::TrainerOptions options;
  options.batch_size = o.batch;
  options.seed = o.seed;
  options.epochs = o.epochs;
  options.threads = o.threads;
  options.max_steps_per_epoch = o.steps_per_epoch;
  options.lr_decay_to = o.lr_decay_to;
  absl::StatusOr<std::unique_ptr<gan::Trainer>> trainer;
  if (!o.resume.empty()) {
    trainer = gan::Trainer::Resume(o.resume, *showers, options);
  } else {
    absl::StatusOr<gan::ModelConfig> config = gan::PresetConfig(o.preset);
    if (!config.ok()) return config.status();
    if (o.learning_rate > 0) config->learning_rate = o.learning_rate;
    if (o.label_flip >= 0) config->label_flip = o.label_flip;
    if (!o.model_set.empty()) {
      config = gan::OverrideModelConfig(*config, o.model_set);
      if (!config.ok()) return config.status();
    }
    gan::ConditionSample sample;
    if (config->fit_conditions_to_data || config->generator_template) {
      std::vector<int64_t> rows(static_cast<size_t>(showers->events()));
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
      absl::StatusOr<gan::ConditionSample> sampled = gan::SampleConditions(*config, *showers, rows);
      if (!sampled.ok()) return sampled.status();
      sample = *std::move(sampled);
    }
    if (config->fit_conditions_to_data) {
      absl::StatusOr<std::string> fitted = gan::FitConditionsToData(sample, &*config);
      if (!fitted.ok()) return fitted.status();
      log << *fitted << "\n";
    }
    trainer = gan::Trainer::Create(*config, *showers, options);
    if (trainer.ok() && config->generator_template) {
      absl::Status set =
          (*trainer)->mutable_state().generator->SetShowerTemplate(sample.shower_template);
      if (!set.ok()) return set;
      log << "shower template: fitted to " << sample.sample_ecal.size() << " training events\n";
    }
  }
  if (!trainer.ok()) return trainer.status();
  gan::Trainer& t = **trainer;
  const bool angles = t.config().variable_angle();
  log << "model " << t.config().preset << ": batch " << t.batch_size() << ", "
      << t.steps_per_epoch() << " steps per epoch, " << o.threads << " threads, seed "
      << t.state().seed << (o.resume.empty() ? "" : ", resumed from " + o.resume) << "\n";
  while (t.state().epoch < o.epochs) {
    absl::StatusOr<gan::EpochReport> epoch = t.RunEpoch();
    if (!epoch.ok()) return epoch.status();
    log << absl::StrFormat("epoch %d/%d  D %s  G %s  %.1f samples/s  %.1f s\n", epoch->epoch + 1,
                           o.epochs, Losses(epoch->discriminator_loss, angles),
                           Losses(epoch->generator_loss, angles), epoch->samples_per_second,
                           epoch->seconds);
    log.flush();
    if (absl::Status s = t.SaveCheckpoint(o.out); !s.ok()) return s;
  }
  log << "checkpoint: " << o.out << "\n";
  return absl::OkStatus();
}

absl::Status RunLocalGenerate(const LocalGenerateOptions& o, std::ostream& log) {
  if (o.checkpoint.empty()) return absl::InvalidArgumentError("--checkpoint is required");
  if (o.out.empty()) return absl::InvalidArgumentError("--out (HDF5 path) is required");
  if (o.threads > 0) at::set_num_threads(o.threads);
  gan::GenerationRequest request;
  request.seed = o.seed;
  request.batch_size = o.batch;
  std::mt19937_64 rng(o.seed);
  if (!o.energies.empty()) {
    request.energy_gev = o.energies;
  } else {
    if (o.count < 1 || !(o.energy_min > 0) || o.energy_max < o.energy_min) {
      return absl::InvalidArgumentError(
          "give --energies=e1,e2,... or --energy-range=min:max with --count=n (GeV, min > 0)");
    }
    std::uniform_real_distribution<double> u(o.energy_min, o.energy_max);
    for (int64_t i = 0; i < o.count; ++i) request.energy_gev.push_back(static_cast<float>(u(rng)));
  }
  absl::StatusOr<std::unique_ptr<gan::ShowerGenerator>> generator =
      gan::ShowerGenerator::Load(o.checkpoint);
  if (!generator.ok()) return generator.status();
  if ((*generator)->config().variable_angle()) {
    std::uniform_real_distribution<double> u(o.theta_min_deg, o.theta_max_deg);
    for (size_t i = 0; i < request.energy_gev.size(); ++i) {
      request.theta_rad.push_back(static_cast<float>(u(rng) * M_PI / 180.0));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<showers::ShowerSet> showers = (*generator)->Generate(request);
  if (!showers.ok()) return showers.status();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (absl::Status s = showers::WriteShowerFile(o.out, *showers); !s.ok()) return s;
  log << absl::StrFormat("generated %d showers with %s in %.2f s (%.2f ms/shower) -> %s\n",
                         showers->events(), (*generator)->config().preset, seconds,
                         1000.0 * seconds / showers->events(), o.out);
  return absl::OkStatus();
}

absl::Status RunExport(const ExportOptions& o, std::ostream& log) {
  absl::StatusOr<exporter::ExportFormat> format = exporter::ParseExportFormat(o.format);
  if (!format.ok()) return format.status();
  struct stat st;
  if (!o.force && stat(o.out.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(
        absl::StrCat(o.out, " exists; give another --out or --force to replace it"));
  }
  absl::StatusOr<v1::ExportProfile> profile = jobspec::ParseExportProfile(o.profile);
  if (!profile.ok()) return profile.status();
  absl::StatusOr<exporter::ExportedModel> exported =
      exporter::ExportCheckpoint(o.checkpoint, *format, *profile);
  if (!exported.ok()) return exported.status();
  const std::string& bytes = exported->bytes;
  // Without --force the final name is taken with link(), which fails if it appeared meanwhile.
  absl::Status written =
      WriteFileAtomically(o.out, {bytes}, o.force ? ExistingFile::kReplace : ExistingFile::kKeep);
  if (absl::IsAlreadyExists(written)) {
    return absl::AlreadyExistsError(
        absl::StrCat(o.out, " exists; give another --out or --force to replace it"));
  }
  if (!written.ok()) return written;
  log << "exported " << o.checkpoint << " as " << o.format << " (" << o.profile
      << " profile) to " << o.out << " (" << bytes.size() << " bytes)\n";
  return absl::OkStatus();
}

absl::Status RunToyMc(const ToyMcOptions& o, std::ostream& log) {
  if (o.out.empty()) return absl::InvalidArgumentError("--out (HDF5 path) is required");
  absl::StatusOr<showers::ToyMcConfig> config = showers::ParseToyMcSpec(o.spec);
  if (!config.ok()) return config.status();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<showers::ShowerSet> showers = showers::SimulateToyMc(*config);
  if (!showers.ok()) return showers.status();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (absl::Status s = showers::WriteShowerFile(o.out, *showers); !s.ok()) return s;
  log << absl::StrFormat("simulated %d showers (%s) in %.2f s -> %s\n", showers->events(),
                         showers::FormatToyMcSpec(*config), seconds, o.out);
  return absl::OkStatus();
}

int RunCheckpointDiff(const std::string& a, const std::string& b, std::ostream& out,
                      std::ostream& err) {
  absl::StatusOr<gan::TrainingState> first = gan::ReadCheckpoint(a, /*load_optimizers=*/true);
  if (!first.ok()) {
    err << "gantry-worker checkpoint-diff: " << a << ": " << first.status() << "\n";
    return 2;
  }
  absl::StatusOr<gan::TrainingState> second = gan::ReadCheckpoint(b, /*load_optimizers=*/true);
  if (!second.ok()) {
    err << "gantry-worker checkpoint-diff: " << b << ": " << second.status() << "\n";
    return 2;
  }
  if (first->config.architecture != second->config.architecture) {
    err << "gantry-worker checkpoint-diff: " << a << " holds a " << first->config.preset
        << " model, " << b << " a " << second->config.preset << " model\n";
    return 2;
  }
  out << absl::StrFormat("A: %s (epoch %d, step %d)\nB: %s (epoch %d, step %d)\n", a, first->epoch,
                         first->step, b, second->epoch, second->step);
  const std::vector<gan::TensorDifference> diffs =
      gan::CompareTrainingStates(*first, *second, /*optimizers=*/true);
  int networks = 0, networks_differ = 0, optimizer_differ = 0;
  for (const gan::TensorDifference& d : diffs) {
    const bool optimizer = absl::StrContains(d.name, "_optimizer.");
    if (!optimizer) ++networks;
    if (!d.identical) ++(optimizer ? optimizer_differ : networks_differ);
    if (optimizer && d.identical) continue;  // hundreds of lines; only differences matter there
    out << absl::StrFormat("%-60s max_abs_diff %.9g%s\n", d.name, d.max_abs_difference,
                           d.problem.empty() ? "" : "  (" + d.problem + ")");
  }
  out << absl::StrFormat("%d of %d parameters and buffers differ; %d optimiser tensors differ\n",
                         networks_differ, networks, optimizer_differ);
  return networks_differ == 0 ? 0 : 1;
}

int RunVerifyCheckpoint(int fd, std::ostream& out) {
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  absl::StatusOr<gan::CheckpointKind> kind = gan::PeekCheckpointKind(path);
  absl::Status status = !kind.ok() ? kind.status()
                        : *kind == gan::CheckpointKind::kBaseline
                            ? baseline::ReadBaselineCheckpoint(path).status()
                            : gan::ReadCheckpoint(path, /*load_optimizers=*/true).status();
  out << runner::FormatVerifyReport(status) << std::flush;
  return out ? 0 : 1;
}

}  // namespace gantry::app
