#include "server/coordinator/study_summary.h"

#include <cmath>

#include "storage/study_repository.h"

namespace gantry::server {

namespace v1 = ::gantry::v1;

MeanAndSpread MeanAndSpreadOf(const std::vector<double>& values) {
  MeanAndSpread out;
  if (values.empty()) return out;
  double sum = 0;
  for (double v : values) sum += v;
  out.mean = sum / static_cast<double>(values.size());
  if (values.size() < 2) return out;
  double squares = 0;
  for (double v : values) squares += (v - out.mean) * (v - out.mean);
  out.stddev = std::sqrt(squares / static_cast<double>(values.size() - 1));
  return out;
}

int BestTrialIndex(const std::vector<v1::Trial>& trials, bool maximize) {
  int best = -1;
  for (size_t i = 0; i < trials.size(); ++i) {
    const v1::Trial& t = trials[i];
    if (t.state() != v1::TRIAL_STATE_SUCCEEDED || !t.has_objective() ||
        !std::isfinite(t.objective())) {
      continue;
    }
    if (best < 0 || (maximize ? t.objective() > trials[best].objective()
                              : t.objective() < trials[best].objective())) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

void SummarizeStudy(const std::vector<v1::Trial>& trials, v1::Study* study) {
  int running = 0;
  double hours = 0;
  for (const v1::Trial& t : trials) {
    running += t.state() == v1::TRIAL_STATE_RUNNING;
    hours += t.device_hours();
  }
  study->set_trials_started(static_cast<int>(trials.size()));
  study->set_trials_running(running);
  study->set_trials_finished(static_cast<int>(trials.size()) - running);
  study->set_device_hours(hours);
  const int best = BestTrialIndex(trials, study->spec().objective().maximize());
  if (best >= 0) {
    if (study->best_trial() == 0) study->set_best_trial(trials[best].number());
    for (const v1::Trial& t : trials) {
      if (t.number() == study->best_trial() && t.has_objective()) {
        study->set_best_objective(t.objective());
      }
    }
  }
}

}  // namespace gantry::server
