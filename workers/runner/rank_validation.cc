#include "workers/runner/rank_validation.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/stopwatch.h"
#include "workers/physics/validation.h"
#include "workers/runner/holdout_split.h"

namespace gantry::runner {

namespace v1 = ::gantry::v1;

namespace {

// The name a metric of the physics report is recorded under (the registry's name of the mean
// relative error of the sampling fraction).
std::string RecordedName(const std::string& key) {
  return key == "sf_mre"        ? "mre_sampling_fraction"
         : key == "sf_mre_null" ? "mre_sampling_fraction_null"
                                : key;
}

// spec.validation.showers_per_bin with its default.
int64_t ShowersPerBin(const v1::ValidationSettings& settings) {
  return settings.showers_per_bin() > 0 ? settings.showers_per_bin() : 500;
}

// The report's histograms into the result, labelled with their energy (and angle) bins, up to
// 4 MiB in all (well inside the control pipe's frame limit).
void AddHistograms(const physics::ValidationReport& report, v1::JobResult* result) {
  size_t bytes = 0;
  for (const physics::Histogram& h : report.histograms) {
    v1::Histogram out;
    out.set_name(h.name);
    out.set_x_label(h.x_label);
    out.mutable_edges()->Add(h.edges.begin(), h.edges.end());
    out.mutable_reference()->Add(h.reference.begin(), h.reference.end());
    out.mutable_generated()->Add(h.generated.begin(), h.generated.end());
    out.mutable_reference_error()->Add(h.reference_error.begin(), h.reference_error.end());
    out.mutable_generated_error()->Add(h.generated_error.begin(), h.generated_error.end());
    out.mutable_x()->Add(h.x.begin(), h.x.end());
    if (h.energy_bin >= 0 && h.energy_bin < static_cast<int>(report.bins.size())) {
      const physics::BinMetrics& bin = report.bins[h.energy_bin];
      std::string label = absl::StrFormat("%g-%g GeV", bin.energy_lo_gev, bin.energy_hi_gev);
      if (bin.theta_hi_rad > 0) {
        absl::StrAppend(&label,
                        absl::StrFormat(", %.3f-%.3f rad", bin.theta_lo_rad, bin.theta_hi_rad));
      }
      out.set_energy_bin(label);
    }
    bytes += out.ByteSizeLong();
    if (bytes > (4u << 20)) break;
    *result->add_histograms() = std::move(out);
  }
}

}  // namespace

absl::Status RankValidation::ScoreEnergyBand(const Generator& generate, bool variable,
                                             const jobspec::LeftOutBand& band, uint64_t seed,
                                             const std::string& prefix, v1::JobResult* result) {
  std::vector<int64_t> members;
  for (int64_t i = 0; i < holdout_.events(); ++i) {
    if (band.Contains(holdout_.energy_gev[i])) members.push_back(i);
  }
  if (static_cast<int64_t>(members.size()) < kMinBandEvents) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "validation.leave_out: %d held-out events in %g-%g GeV, at least %d needed to score it; "
        "raise spec.validation.holdout_fraction or widen the band",
        members.size(), band.min_gev, band.max_gev, kMinBandEvents));
  }
  const int64_t showers = ShowersPerBin(plan_.assignment.spec().validation());
  gan::GenerationRequest request;
  request.seed = seed;
  request.batch_size = 64;
  for (int64_t k = 0; k < showers; ++k) {
    const int64_t event = members[k % members.size()];
    request.energy_gev.push_back(holdout_.energy_gev[event]);
    if (variable) request.theta_rad.push_back(holdout_.theta_rad[event]);
  }
  const showers::ShowerSet reference = SelectEvents(holdout_, members);
  ASSIGN_OR_RETURN(showers::ShowerSet generated, generate(request));
  generated.particle = holdout_.particle;
  physics::ValidationOptions options;
  options.energy_centres_gev = {(band.min_gev + band.max_gev) / 2};
  options.energy_half_width_gev = (band.max_gev - band.min_gev) / 2;
  absl::StatusOr<physics::ValidationReport> report =
      physics::ValidateShowers(reference, generated, options);
  if (!report.ok()) {
    return absl::Status(report.status().code(),
                        absl::StrCat("validation of ", band.min_gev, "-", band.max_gev,
                                     " GeV: ", report.status().message()));
  }
  auto& metrics = *result->mutable_metrics();
  for (const char* key : kBandMetrics) {
    auto it = report->metrics.find(key);
    if (it == report->metrics.end()) continue;
    metrics[prefix + RecordedName(key)] = it->second;
  }
  metrics[prefix + "holdout_events"] = static_cast<double>(reference.events());
  (*result->mutable_hyper_parameters())[prefix + "energy_gev"] =
      absl::StrFormat("%.6g-%.6g", band.min_gev, band.max_gev);
  log_("INFO",
       absl::StrFormat("validation of %g-%g GeV (%s*): %d generated vs %d held-out "
                       "showers, fom %.4g (MC floor %.4g)",
                       band.min_gev, band.max_gev, prefix, generated.events(), reference.events(),
                       report->metrics["fom"], report->metrics["fom_null"]));
  return absl::OkStatus();
}

absl::Status RankValidation::ScoreLeftOutBand(const Generator& generate, bool variable,
                                              v1::JobResult* result) {
  const jobspec::LeftOutBand band = *plan_.leave_out;
  RETURN_IF_ERROR(
      ScoreEnergyBand(generate, variable, band, plan_.seed + 7927, "left_out_", result));
  // The control: a trained band of the same width half a width beside it, above when the data
  // reach that far, else below; none when neither fits the dataset's energies.
  const double width = band.max_gev - band.min_gev;
  const v1::Range& data = result->energy_range_gev();
  for (double shift : {1.5 * width, -1.5 * width}) {
    const jobspec::LeftOutBand control{band.min_gev + shift, band.max_gev + shift};
    if (control.min_gev >= data.min() && control.max_gev <= data.max()) {
      return ScoreEnergyBand(generate, variable, control, plan_.seed + 7933, "left_out_control_",
                             result);
    }
  }
  log_("WARNING", absl::StrFormat("leave-out: no trained band of %g GeV fits beside %g-%g GeV "
                                  "inside %g-%g GeV; the left-out band has no control",
                                  width, band.min_gev, band.max_gev, data.min(), data.max()));
  return absl::OkStatus();
}

void RankValidation::RecordRecipe(uint64_t latent_seed, v1::JobResult* result) const {
  auto& recipe = *result->mutable_hyper_parameters();
  if (plan_.folds > 0) {
    recipe["validation_folds"] = absl::StrCat(plan_.folds);
    recipe["validation_fold"] = absl::StrCat(plan_.validation_fold);
    recipe["validation_split_seed"] = absl::StrCat(plan_.split_seed);
  } else {
    char text[32];  // the shortest text that reads back as the same fraction
    const auto written = std::to_chars(text, text + sizeof(text), plan_.holdout_fraction);
    recipe["validation_holdout_fraction"] = std::string(text, written.ptr);
    recipe["validation_split_seed"] = absl::StrCat(plan_.seed);
  }
  recipe["validation_latent_seed"] = absl::StrCat(latent_seed);
}

absl::Status RankValidation::Run(const Generator& generate, bool variable, bool final_validation,
                                 v1::JobResult* result) {
  const auto start = std::chrono::steady_clock::now();
  const v1::ValidationSettings& settings = plan_.assignment.spec().validation();
  if (holdout_.events() == 0) {
    return absl::FailedPreconditionError(
        "validation: the hold-out split is empty (raise validation.holdout_fraction or the number "
        "of events, or disable validation)");
  }
  physics::ValidationOptions options;
  gan::GenerationRequest request;
  request.seed = plan_.seed + 7919;
  request.batch_size = 64;
  const int64_t per_bin = ShowersPerBin(settings);
  auto add_condition = [&](int64_t event) {
    request.energy_gev.push_back(holdout_.energy_gev[event]);
    if (variable) request.theta_rad.push_back(holdout_.theta_rad[event]);
  };
  if (settings.energies_size() > 0) {
    const double half = settings.energy_bin_half_width() > 0 ? settings.energy_bin_half_width() : 5;
    options.energy_half_width_gev = half;
    for (double centre : settings.energies()) {
      options.energy_centres_gev.push_back(centre);
      std::vector<int64_t> members;
      for (int64_t i = 0; i < holdout_.events(); ++i) {
        if (std::abs(holdout_.energy_gev[i] - centre) <= half) members.push_back(i);
      }
      // Generated showers at the held-out conditions of the bin, cycled up to showers_per_bin.
      for (int64_t k = 0; !members.empty() && k < per_bin; ++k) {
        add_condition(members[k % members.size()]);
      }
    }
  } else {
    // One generated shower per held-out event (at most 4 bins x showers_per_bin of them).
    const int64_t n = std::min<int64_t>(holdout_.events(), 4 * per_bin);
    for (int64_t i = 0; i < n; ++i) add_condition(i);
    options.default_energy_bins =
        static_cast<int>(std::clamp<int64_t>(holdout_.events() / 20, 1, 4));
  }
  if (request.energy_gev.empty()) {
    return absl::FailedPreconditionError(
        "validation: no held-out event falls into the validation.energies bins");
  }
  ASSIGN_OR_RETURN(showers::ShowerSet generated, generate(request));
  generated.particle = holdout_.particle;
  absl::StatusOr<physics::ValidationReport> report =
      physics::ValidateShowers(holdout_, generated, options);
  if (!report.ok()) {
    return absl::Status(report.status().code(),
                        absl::StrCat("validation: ", report.status().message()));
  }
  last_ = PrecisionCheck::Fp32Validation{request, options, report->metrics};
  auto& metrics = *result->mutable_metrics();
  for (const auto& [key, value] : report->metrics) {
    metrics[RecordedName(key)] = value;
  }
  metrics["holdout_events"] = static_cast<double>(holdout_.events());
  metrics["generated_events"] = static_cast<double>(generated.events());
  RecordRecipe(request.seed, result);
  AddHistograms(*report, result);
  log_("INFO", absl::StrFormat("validation: %d generated vs %d held-out showers in %d bins, fom "
                               "%.4g, mre_sampling_fraction %.4g, eprof %.4g, pos %.4g (%.3f s)",
                               generated.events(), holdout_.events(), report->bins.size(),
                               metrics["fom"], metrics["mre_sampling_fraction"], metrics["eprof"],
                               metrics["pos"], SecondsSince(start)));
  if (final_validation && plan_.leave_out.has_value()) {
    RETURN_IF_ERROR(ScoreLeftOutBand(generate, variable, result));
  }
  return absl::OkStatus();
}

}  // namespace gantry::runner
