#include "workers/runner/rank_input.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/stopwatch.h"
#include "showers/stream/generate_chunk.h"
#include "workers/gan/condition_fit.h"
#include "workers/gan/prefetching_batch_source.h"

namespace gantry::runner {
namespace {

namespace v1 = ::gantry::v1;

}  // namespace

RankInput::RankInput(const RankPlan& plan, RankLog log)
    : plan_(plan), rank_(plan.assignment.rank()), log_(std::move(log)) {}

void RankInput::Describe(const MaterializedDataset& dataset,
                         const showers::ShowerFileReader& reader, const std::string& particle,
                         double seconds) const {
  const std::array<int64_t, 3>& shape = reader.shape();
  log_("INFO", absl::StrFormat("dataset %s materialised: %d events of %dx%dx%d (%s), sha256 %s, "
                               "%s in %.1f s",
                               plan_.assignment.spec().dataset(), reader.events(), shape[0],
                               shape[1], shape[2], particle, dataset.sha256,
                               dataset.from_cache ? "from the cache"
                               : dataset.downloaded_bytes > 0
                                   ? absl::StrCat("downloaded ", dataset.downloaded_bytes, " bytes")
                                   : "filled into the cache",
                               seconds));
}

absl::Status RankInput::CheckFitsModel(const showers::ShowerFileReader& reader) const {
  const std::array<int64_t, 3>& shape = reader.shape();
  const bool variable = plan_.model.variable_angle();
  const bool layout_fits = reader.layout() == (variable ? showers::Layout::kVariableAngle3DGan
                                                        : showers::Layout::kFixedAngle3DGan);
  if (!layout_fits || shape != plan_.model.grid) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dataset %s has %dx%dx%d events but preset %s needs the %s layout (%dx%dx%d)",
        plan_.assignment.spec().dataset(), shape[0], shape[1], shape[2], plan_.model.preset,
        variable ? "3DGAN variable-angle" : "3DGAN fixed-angle", plan_.model.grid[0],
        plan_.model.grid[1], plan_.model.grid[2]));
  }
  return absl::OkStatus();
}

void RankInput::Record(const MaterializedDataset& dataset, const std::string& particle,
                       v1::JobResult* result) {
  result->set_dataset_sha256(dataset.sha256);
  result->set_particle(showers::ParticleOfFileName(particle));
  result->mutable_energy_range_gev()->set_min(dataset.energy_min_gev);
  result->mutable_energy_range_gev()->set_max(dataset.energy_max_gev);
  if (dataset.theta_max_rad > 0) {
    result->mutable_theta_range_rad()->set_min(dataset.theta_min_rad);
    result->mutable_theta_range_rad()->set_max(dataset.theta_max_rad);
  }
}

absl::StatusOr<HoldoutSplit> RankInput::Split(const showers::ShowerFileReader& reader,
                                              const std::string& particle,
                                              std::optional<showers::ShowerSet>* holdout) const {
  // The hold-out split is identical on every rank; only rank 0 validates, so only it reads the
  // held-out events.
  ASSIGN_OR_RETURN(
      HoldoutSplit split,
      plan_.folds > 0
          ? SplitFolds(reader.events(), plan_.folds, plan_.validation_fold, plan_.split_seed)
          : SplitHoldout(reader.events(), plan_.holdout_fraction, plan_.seed));
  if (plan_.leave_out.has_value()) RETURN_IF_ERROR(LeaveOutBand(reader, &split.train));
  if (rank_ == 0 && plan_.validation) {
    ASSIGN_OR_RETURN(showers::ShowerSet events, reader.ReadEvents(split.holdout));
    events.particle = particle;
    *holdout = std::move(events);
  }
  if (plan_.folds > 0) {
    log_("INFO", absl::StrFormat("k-fold: validating on fold %d of %d (%d events), training on "
                                 "the other %d events (split seed %d)",
                                 plan_.validation_fold, plan_.folds, split.holdout.size(),
                                 split.train.size(), plan_.split_seed));
  } else {
    log_("INFO", absl::StrFormat("hold-out: %d events set aside for validation, %d for training "
                                 "(fraction %.3g, seed %d)",
                                 split.holdout.size(), split.train.size(), plan_.holdout_fraction,
                                 plan_.seed));
  }
  return split;
}

absl::Status RankInput::LeaveOutBand(const showers::ShowerFileReader& reader,
                                     std::vector<int64_t>* train) const {
  const jobspec::LeftOutBand band = *plan_.leave_out;
  const std::vector<float>& energy = reader.energy_gev();
  const auto [lo, hi] = std::minmax_element(energy.begin(), energy.end());
  if (lo == energy.end() || !(band.min_gev > *lo && band.max_gev < *hi)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "spec.validation.leave_out: the band %g-%g GeV must lie inside the dataset's energies "
        "(%g-%g GeV) so that the model interpolates into it; move or narrow the band",
        band.min_gev, band.max_gev, lo == energy.end() ? 0.0 : *lo,
        hi == energy.end() ? 0.0 : *hi));
  }
  const size_t before = train->size();
  train->erase(std::remove_if(train->begin(), train->end(),
                              [&](int64_t event) { return band.Contains(energy[event]); }),
               train->end());
  if (train->empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "spec.validation.leave_out: every training event lies in %g-%g GeV; narrow the band",
        band.min_gev, band.max_gev));
  }
  log_("INFO", absl::StrFormat("leave-out: %d training events in %g-%g GeV skipped, %d left",
                               before - train->size(), band.min_gev, band.max_gev, train->size()));
  return absl::OkStatus();
}

absl::StatusOr<TrainingInput> RankInput::Prepare(
    std::shared_ptr<const showers::ShowerFileReader> reader, const std::string& particle,
    const std::string& local_path, bool pin_memory,
    google::protobuf::Map<std::string, std::string>* hyper_parameters,
    std::optional<showers::ShowerSet>* holdout) const {
  ASSIGN_OR_RETURN(HoldoutSplit split, Split(*reader, particle, holdout));
  TrainingInput input;
  input.model = plan_.model;
  // A restart takes the template from its checkpoint; it refits only the conditions.
  const bool resuming = !plan_.assignment.resume_checkpoint_sha256().empty();
  const bool fit_template = input.model.generator_template && !resuming;
  if (input.model.fit_conditions_to_data || fit_template) {
    // Every rank fits the same events to the same values, and so does a restart (its checkpoint's
    // config must equal the job's).
    const auto fit_start = std::chrono::steady_clock::now();
    gan::ModelConfig sampled = input.model;
    if (!fit_template) {
      sampled.generator_template = false;
      sampled.template_modes = 0;
    }
    ASSIGN_OR_RETURN(gan::ConditionSample sample,
                     gan::SampleConditions(sampled, *reader, split.train));
    if (input.model.fit_conditions_to_data) {
      ASSIGN_OR_RETURN(const std::string fitted, gan::FitConditionsToData(sample, &input.model));
      log_("INFO", absl::StrFormat("%s (%.1f s)", fitted, SecondsSince(fit_start)));
    }
    if (fit_template) {
      log_("INFO", absl::StrFormat("shower template: %d modes fitted to %d training events",
                                   input.model.template_modes, sample.sample_energy_gev.size()));
    }
    input.shower_template = std::move(sample.shower_template);
  }
  // The lineage records the conditions the model was trained with.
  auto& hp = *hyper_parameters;
  hp["fake_energy_range_gev"] = absl::StrFormat("%.6g-%.6g", input.model.fake_energy_min_gev,
                                                input.model.fake_energy_max_gev);
  hp["ecal_fit"] = absl::StrJoin(input.model.ecal_fit, ",", [](std::string* out, double c) {
    absl::StrAppend(out, absl::StrFormat("%.6g", c));
  });
  // The training events stream from the file through the prefetching source.
  const auto pipeline_start = std::chrono::steady_clock::now();
  gan::PrefetchOptions prefetch;
  prefetch.queue_depth = plan_.prefetch_batches;
  prefetch.loader_threads = plan_.loader_threads;
  prefetch.pin_memory = pin_memory;
  ASSIGN_OR_RETURN(
      std::unique_ptr<gan::PrefetchingBatchSource> batches,
      gan::PrefetchingBatchSource::Create(input.model, reader, std::move(split.train), prefetch));
  log_("INFO",
       absl::StrFormat("input pipeline: %d training events (%d dropped by the event "
                       "selection) streamed from %s, %d batches read ahead by %d loader "
                       "threads (%.1f s to set up)",
                       batches->events(), batches->dropped_events(), local_path,
                       plan_.prefetch_batches, plan_.loader_threads, SecondsSince(pipeline_start)));
  hp["prefetch_batches"] = absl::StrCat(plan_.prefetch_batches);
  hp["loader_threads"] = absl::StrCat(plan_.loader_threads);
  input.batches = std::move(batches);
  return input;
}

}  // namespace gantry::runner
