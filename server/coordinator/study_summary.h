// Study summary: what a study's trials add up to (counts, device hours, best trial) and the
// mean and spread of a trial's fold objectives. Pure functions over the stored records.
#ifndef GANTRY_SERVER_COORDINATOR_STUDY_SUMMARY_H_
#define GANTRY_SERVER_COORDINATOR_STUDY_SUMMARY_H_

#include <vector>

#include "gantry/v1/studies.pb.h"

namespace gantry::server {

// The mean of `values` and their sample standard deviation (0 for fewer than two values).
struct MeanAndSpread {
  double mean = 0;
  double stddev = 0;
};
MeanAndSpread MeanAndSpreadOf(const std::vector<double>& values);

// The index in `trials` of the SUCCEEDED trial with the best objective (lowest, or highest when
// `maximize`; ties go to the earlier trial), or -1 when none has one.
int BestTrialIndex(const std::vector<gantry::v1::Trial>& trials, bool maximize);

// Fills study's trials_started/running/finished, device_hours and best_objective (best_trial
// too while the stored one is 0) from `trials`.
void SummarizeStudy(const std::vector<gantry::v1::Trial>& trials, gantry::v1::Study* study);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_STUDY_SUMMARY_H_
