// Early stopping of poor trials from their intermediate values: the median stopping rule and ASHA
// (asynchronous successive halving). A pure function of the reported histories.
#ifndef GANTRY_STUDIES_EARLY_STOPPING_H_
#define GANTRY_STUDIES_EARLY_STOPPING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "studies/study_types.h"

namespace gantry::studies {

enum class EarlyStoppingRule {
  kNone,
  // Stop a trial whose best value so far is worse than the median, over the other trials that
  // reported at or past its latest step, of their running averages up to that step (Google
  // Vizier's rule).
  kMedian,
  // Rungs at steps min_steps * reduction_factor^k. When a trial first reports at or past a rung,
  // it continues only if its value there is among the best 1/reduction_factor of the values all
  // trials first reported at that rung (itself included; with fewer than reduction_factor trials
  // it must be the best).
  kAsha,
};

// "none", "median", "asha".
absl::string_view EarlyStoppingRuleName(EarlyStoppingRule rule);
// The inverse of EarlyStoppingRuleName; INVALID_ARGUMENT listing the accepted names otherwise.
absl::StatusOr<EarlyStoppingRule> ParseEarlyStoppingRule(absl::string_view name);

struct EarlyStoppingOptions {
  EarlyStoppingRule rule = EarlyStoppingRule::kNone;
  // No trial is stopped before this step (median: the grace period; ASHA: the first rung).
  int64_t min_steps = 1;
  // Median: decide only when at least this many other trials reported at or past the step.
  int min_trials = 3;
  // ASHA: the rungs' growth factor and the share (1/reduction_factor) that continues.
  int reduction_factor = 3;
};

// INVALID_ARGUMENT naming the field: min_steps < 1, min_trials < 1, reduction_factor < 2.
absl::Status ValidateEarlyStopping(const EarlyStoppingOptions& options);

// What ShouldStopTrial decided, with a sentence for the trial's record.
struct StopDecision {
  bool stop = false;
  std::string reason;
};

// Whether the trial whose reports are `trial` should stop now, at its latest report, given the
// reports of the study's other trials (finished, stopped or running). Reports are (step, value)
// in any order; a non-finite value counts as worse than every finite one, and a non-finite
// latest value past min_steps stops the trial. INVALID_ARGUMENT for bad options or a negative
// step; a trial with no reports continues.
absl::StatusOr<StopDecision> ShouldStopTrial(
    absl::Span<const IntermediateValue> trial,
    absl::Span<const std::vector<IntermediateValue>> other_trials,
    const EarlyStoppingOptions& options);

}  // namespace gantry::studies

#endif  // GANTRY_STUDIES_EARLY_STOPPING_H_
