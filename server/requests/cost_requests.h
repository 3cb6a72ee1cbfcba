// Checks of GetCostReportRequest: the groups and the time range a cost report sums over.
#ifndef GANTRY_SERVER_REQUESTS_COST_REQUESTS_H_
#define GANTRY_SERVER_REQUESTS_COST_REQUESTS_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gantry/v1/training.pb.h"

namespace gantry::server {

// A cost report's groups and [start, end) once checked.
struct CostReportShape {
  bool by_tenant = false, by_pool = false, by_model = false, by_day = false;
  absl::Time start;
  absl::Time end;
};

// Longest range one report covers.
inline constexpr int kMaxCostReportDays = 400;

// INVALID_ARGUMENT naming the field for an unknown or repeated group_by entry, an invalid
// timestamp, start_time not before end_time, or a range above kMaxCostReportDays. Unset start:
// the first instant of the current month (UTC); unset end: `now`.
absl::StatusOr<CostReportShape> ValidateCostReport(const gantry::v1::GetCostReportRequest& request,
                                                   absl::Time now);

}  // namespace gantry::server

#endif  // GANTRY_SERVER_REQUESTS_COST_REQUESTS_H_
