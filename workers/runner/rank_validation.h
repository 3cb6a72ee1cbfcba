// RankValidation: the validation stage of a rank (rank 0 with validation on). It keeps the
// held-out events, generates showers at their conditions with whatever generator it is given (the
// trained network, a baseline), scores them with workers/physics and writes the metrics, the
// histograms and the recipe of the sample into the job result; the final validation also scores a
// left-out energy band beside a trained control band. No process group, no server.
#ifndef GANTRY_WORKERS_RUNNER_RANK_VALIDATION_H_
#define GANTRY_WORKERS_RUNNER_RANK_VALIDATION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/worker.pb.h"
#include "showers/shower_set.h"
#include "workers/gan/shower_generator.h"
#include "workers/runner/precision_check.h"
#include "workers/runner/rank_log.h"
#include "workers/runner/rank_plan.h"

namespace gantry::runner {

class RankValidation {
 public:
  // Showers at a validation request's conditions (the trained generator, or a baseline).
  using Generator =
      std::function<absl::StatusOr<showers::ShowerSet>(const gan::GenerationRequest&)>;

  // `plan` outlives this.
  RankValidation(const RankPlan& plan, RankLog log) : plan_(plan), log_(std::move(log)) {}

  void SetHoldout(showers::ShowerSet holdout) { holdout_ = std::move(holdout); }
  const showers::ShowerSet& holdout() const { return holdout_; }
  // What the newest validation ran and measured (for the BF16 check after the final one).
  const std::optional<PrecisionCheck::Fp32Validation>& last() const { return last_; }

  // Generates at the held-out conditions (spec.validation) and validates against the hold-out:
  // metrics, histograms and the sample's recipe (validation_* hyper-parameters) into `result`.
  // The final validation also scores spec.validation.leave_out (ScoreLeftOutBand), reading the
  // dataset's energies from result->energy_range_gev(). FAILED_PRECONDITION when the hold-out is
  // empty or no held-out event falls into the validation energies.
  absl::Status Run(const Generator& generate, bool variable_angle, bool final_validation,
                   gantry::v1::JobResult* result);

  // Held-out events of a band needed to score it, and the metrics of a band kept in the result
  // (the summary metrics and the field's, with their floors).
  static constexpr int64_t kMinBandEvents = 10;
  static constexpr const char* kBandMetrics[] = {"fom",
                                                 "fom_null",
                                                 "sf_mre",
                                                 "sf_mre_null",
                                                 "eprof",
                                                 "eprof_null",
                                                 "pos",
                                                 "pos_null",
                                                 "fpd",
                                                 "fpd_floor",
                                                 "auc_features",
                                                 "auc_features_floor",
                                                 "sep_mean",
                                                 "sep_mean_floor",
                                                 "separation_power",
                                                 "separation_power_null"};

 private:
  // How to redo this validation from the dataset and an export (the model card's
  // validation.sample): the split and the seed of the latents, as validation_* hyper-parameters.
  void RecordRecipe(uint64_t latent_seed, gantry::v1::JobResult* result) const;
  // The left-out band and its control band scored on their own: metrics left_out_* and
  // left_out_control_*, the bands in the result's hyper-parameters.
  absl::Status ScoreLeftOutBand(const Generator& generate, bool variable_angle,
                                gantry::v1::JobResult* result);
  // The held-out events of `band` against showers generated at their conditions; kBandMetrics
  // with `prefix`. FAILED_PRECONDITION when fewer than kMinBandEvents held-out events fall in it.
  absl::Status ScoreEnergyBand(const Generator& generate, bool variable_angle,
                               const jobspec::LeftOutBand& band, uint64_t seed,
                               const std::string& prefix, gantry::v1::JobResult* result);

  const RankPlan& plan_;
  RankLog log_;
  showers::ShowerSet holdout_;
  std::optional<PrecisionCheck::Fp32Validation> last_;
};

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_RANK_VALIDATION_H_
