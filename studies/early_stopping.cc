#include "studies/early_stopping.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"

namespace gantry::studies {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Non-finite values (diverged trainings) rank below every finite one.
double Rank(double value) { return std::isfinite(value) ? value : kInfinity; }

std::vector<IntermediateValue> SortedByStep(absl::Span<const IntermediateValue> reports) {
  std::vector<IntermediateValue> sorted(reports.begin(), reports.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.step < b.step; });
  return sorted;
}

absl::Status CheckSteps(absl::Span<const IntermediateValue> reports, absl::string_view whose) {
  for (const IntermediateValue& report : reports) {
    if (report.step < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(whose, " reported step ", report.step, ": steps must be >= 0"));
    }
  }
  return absl::OkStatus();
}

StopDecision Median(const std::vector<IntermediateValue>& trial,
                    absl::Span<const std::vector<IntermediateValue>> others,
                    const EarlyStoppingOptions& options) {
  const int64_t step = trial.back().step;
  double best = kInfinity;
  for (const IntermediateValue& report : trial) best = std::min(best, Rank(report.value));
  std::vector<double> averages;
  for (const std::vector<IntermediateValue>& other : others) {
    double sum = 0;
    int values = 0;
    int64_t last_step = -1;
    for (const IntermediateValue& report : other) {
      last_step = std::max(last_step, report.step);
      if (report.step <= step) {
        sum += Rank(report.value);
        ++values;
      }
    }
    if (values > 0 && last_step >= step) averages.push_back(sum / values);
  }
  if (static_cast<int>(averages.size()) < options.min_trials) {
    return {false, absl::StrCat("median rule: ", averages.size(), " other trials reached step ",
                                step, ", fewer than the ", options.min_trials, " needed")};
  }
  const size_t middle = averages.size() / 2;
  std::nth_element(averages.begin(), averages.begin() + middle, averages.end());
  double median = averages[middle];
  if (averages.size() % 2 == 0) {
    median = 0.5 * (median + *std::max_element(averages.begin(), averages.begin() + middle));
  }
  if (best > median) {
    return {true, absl::StrCat("median rule: best value ", best, " by step ", step,
                               " is worse than the median ", median, " of ", averages.size(),
                               " other trials' running averages")};
  }
  return {false, absl::StrCat("median rule: best value ", best, " by step ", step,
                              " is within the median ", median)};
}

// The value a trial reported first at or past `rung`, if any.
std::optional<double> RungValue(const std::vector<IntermediateValue>& sorted, int64_t rung) {
  for (const IntermediateValue& report : sorted) {
    if (report.step >= rung) return Rank(report.value);
  }
  return std::nullopt;
}

StopDecision Asha(const std::vector<IntermediateValue>& trial,
                  absl::Span<const std::vector<IntermediateValue>> others,
                  const EarlyStoppingOptions& options) {
  const int64_t step = trial.back().step;
  const int64_t previous = trial.size() > 1 ? trial[trial.size() - 2].step : -1;
  // The highest rung that the latest report is the first to reach.
  int64_t rung = -1;
  int rung_index = -1;
  int64_t candidate = options.min_steps;
  for (int k = 0; candidate <= step; ++k) {
    if (previous < candidate) {
      rung = candidate;
      rung_index = k;
    }
    if (candidate > std::numeric_limits<int64_t>::max() / options.reduction_factor) break;
    candidate *= options.reduction_factor;
  }
  if (rung < 0) return {false, absl::StrCat("ASHA: step ", step, " reaches no new rung")};

  const double value = Rank(trial.back().value);
  std::vector<double> competing = {value};
  for (const std::vector<IntermediateValue>& other : others) {
    if (std::optional<double> other_value = RungValue(SortedByStep(other), rung)) {
      competing.push_back(*other_value);
    }
  }
  std::sort(competing.begin(), competing.end());
  const size_t promoted = std::max<size_t>(1, competing.size() / options.reduction_factor);
  const double threshold = competing[promoted - 1];
  if (value <= threshold && std::isfinite(value)) {
    return {false, absl::StrCat("ASHA: value ", value, " at rung ", rung_index, " (step ", rung,
                                ") is among the best ", promoted, " of ", competing.size())};
  }
  return {true, absl::StrCat("ASHA: value ", value, " at rung ", rung_index, " (step ", rung,
                             ") is not among the best ", promoted, " of ", competing.size(),
                             " (threshold ", threshold, ")")};
}

}  // namespace

absl::string_view EarlyStoppingRuleName(EarlyStoppingRule rule) {
  switch (rule) {
    case EarlyStoppingRule::kNone:
      return "none";
    case EarlyStoppingRule::kMedian:
      return "median";
    case EarlyStoppingRule::kAsha:
      return "asha";
  }
  return "unknown";
}

absl::StatusOr<EarlyStoppingRule> ParseEarlyStoppingRule(absl::string_view name) {
  for (EarlyStoppingRule rule :
       {EarlyStoppingRule::kNone, EarlyStoppingRule::kMedian, EarlyStoppingRule::kAsha}) {
    if (name == EarlyStoppingRuleName(rule)) return rule;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown early stopping rule \"", name, "\": use none, median or asha"));
}

absl::Status ValidateEarlyStopping(const EarlyStoppingOptions& options) {
  if (options.min_steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("early stopping min_steps is ", options.min_steps, ": use a step count >= 1"));
  }
  if (options.min_trials < 1) {
    return absl::InvalidArgumentError(absl::StrCat("early stopping min_trials is ",
                                                   options.min_trials, ": use a trial count >= 1"));
  }
  if (options.reduction_factor < 2) {
    return absl::InvalidArgumentError(absl::StrCat("early stopping reduction_factor is ",
                                                   options.reduction_factor, ": use 2 or more"));
  }
  return absl::OkStatus();
}

absl::StatusOr<StopDecision> ShouldStopTrial(
    absl::Span<const IntermediateValue> trial,
    absl::Span<const std::vector<IntermediateValue>> other_trials,
    const EarlyStoppingOptions& options) {
  if (absl::Status status = ValidateEarlyStopping(options); !status.ok()) return status;
  if (absl::Status status = CheckSteps(trial, "the trial"); !status.ok()) return status;
  for (size_t i = 0; i < other_trials.size(); ++i) {
    if (absl::Status status = CheckSteps(other_trials[i], absl::StrCat("other trial ", i));
        !status.ok()) {
      return status;
    }
  }
  if (options.rule == EarlyStoppingRule::kNone) return StopDecision{false, "no early stopping"};
  if (trial.empty()) return StopDecision{false, "no intermediate value reported yet"};
  const std::vector<IntermediateValue> sorted = SortedByStep(trial);
  const IntermediateValue& latest = sorted.back();
  if (latest.step < options.min_steps) {
    return StopDecision{
        false, absl::StrCat("step ", latest.step, " is before min_steps ", options.min_steps)};
  }
  if (!std::isfinite(latest.value)) {
    return StopDecision{
        true, absl::StrCat("the value at step ", latest.step, " is ", latest.value, " (diverged)")};
  }
  if (options.rule == EarlyStoppingRule::kMedian) return Median(sorted, other_trials, options);
  return Asha(sorted, other_trials, options);
}

}  // namespace gantry::studies
