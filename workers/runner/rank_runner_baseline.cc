// RankRunner's baseline-* jobs (RankRunner::RunBaseline): fit a no-network baseline to the training
// events, upload its checkpoint, validate it as a trained generator is validated, report. Kept
// apart from the training loop in rank_runner.cc.
#include <algorithm>
#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/failure_policy.h"
#include "base/status_macros.h"
#include "workers/baseline/baseline_checkpoint.h"
#include "workers/baseline/baseline_sampler.h"
#include "workers/runner/rank_runner.h"

namespace gantry::runner {

absl::Status RankRunner::RunBaseline(const showers::ShowerFileReader& reader,
                                     const std::string& particle) {
  const baseline::BaselineKind kind = *plan_.baseline;
  const std::string name(baseline::BaselinePresetName(kind));
  auto data_failure = [](absl::Status status) {
    return absl::IsUnavailable(status) || absl::IsCancelled(status)
               ? status
               : WithExitCode(std::move(status), kExitDataError);
  };
  std::optional<showers::ShowerSet> holdout;
  absl::StatusOr<HoldoutSplit> split = input_.Split(reader, particle, &holdout);
  if (!split.ok()) return data_failure(split.status());
  if (holdout.has_value()) validation_.SetHoldout(*std::move(holdout));
  // The fitted events, spread evenly over the training split (as the conditions' sample).
  const int64_t n = static_cast<int64_t>(split->train.size());
  const int64_t k = std::min<int64_t>(n, baseline::kBaselineFitEvents);
  std::vector<int64_t> picked;
  for (int64_t i = 0; i < k; ++i) picked.push_back(split->train[i * n / k]);
  if (picked.empty()) {
    return data_failure(absl::InvalidArgumentError(
        absl::StrCat(name, ": the training split has no events to fit the baseline to")));
  }
  const auto fit_start = std::chrono::steady_clock::now();
  // The fitted events are read in one block and released with the fit.
  absl::StatusOr<baseline::BaselineSampler> sampler =
      [&]() -> absl::StatusOr<baseline::BaselineSampler> {
    ASSIGN_OR_RETURN(const showers::ShowerSet events, reader.ReadEvents(picked));
    baseline::BaselineFitOptions options;
    options.kind = kind;
    return baseline::BaselineSampler::Fit(events, {}, options);
  }();
  if (!sampler.ok()) return data_failure(sampler.status());
  Log("INFO",
      absl::StrFormat(
          "%s (%.1f s; no optimiser step)", sampler->Describe(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - fit_start).count()));
  // The lineage records what the baseline is, not the GAN's optimiser settings.
  const baseline::BaselineParameters& p = sampler->parameters();
  auto& hp = *result_.mutable_hyper_parameters();
  hp.clear();
  hp["baseline"] = name;
  hp["baseline_modes"] = absl::StrCat(p.modes.size());
  hp["baseline_fit_events"] = absl::StrCat(p.fit_events);
  if (baseline::HasSpots(kind)) {
    hp["baseline_spot_gev"] = absl::StrFormat("%.6g", p.spot_gev);
  }

  RETURN_IF_ERROR(StartRunning());
  std::error_code ec;
  std::filesystem::create_directories(options_.work_dir, ec);
  const std::string path = (std::filesystem::path(options_.work_dir) / "baseline.ckpt").string();
  RETURN_IF_ERROR(baseline::WriteBaselineCheckpoint(path, p));
  if (absl::Status uploaded = publisher_->Upload(path, 0, 0, options_.final_upload_retry);
      !uploaded.ok()) {
    return absl::Status(uploaded.code(),
                        absl::StrCat("uploading the baseline's checkpoint: ", uploaded.message()));
  }
  const UploadedCheckpoint upload = publisher_->last().upload;
  result_.set_checkpoint_sha256(upload.sha256);
  result_.set_checkpoint_size_bytes(upload.size_bytes);
  if (plan_.validation) {
    if (StopRequested()) return absl::CancelledError("cancelled before validation");
    RETURN_IF_ERROR(validation_.Run(
        [&sampler](const gan::GenerationRequest& request) -> absl::StatusOr<showers::ShowerSet> {
          return sampler->Sample(request.energy_gev, request.seed);
        },
        /*variable_angle=*/false, /*final_validation=*/true, &result_));
    publisher_->ReportPoint(PointOf(result_, 0, 0));
  }
  result_.mutable_bf16()->set_state(v1::Bf16Check::STATE_UNAVAILABLE);
  result_.mutable_bf16()->set_reason(
      absl::StrCat(name, " has no network: its showers are drawn in float32 only"));
  result_.set_success(true);
  result_.set_message(absl::StrFormat(
      "fitted %s to %d training events (no optimiser step); checkpoint %s%s", name, p.fit_events,
      upload.sha256,
      plan_.validation ? absl::StrFormat("; validation fom %.4g", result_.metrics().at("fom"))
                       : "; validation disabled"));
  {
    absl::MutexLock lock(&progress_mu_);
    progress_done_ = true;
  }
  if (progress_thread_.joinable()) progress_thread_.join();
  v1::WorkerMessage message;
  *message.mutable_result() = result_;
  return Send(message);
}

}  // namespace gantry::runner
