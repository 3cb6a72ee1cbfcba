#include "server/requests/cost_requests.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/safe_text.h"
#include "server/platform/budget_gate.h"
#include "server/requests/field_checks.h"

namespace gantry::server {
namespace {

// Timestamps from year 1970 to 9999 with valid nanos.
bool ValidTimestamp(const google::protobuf::Timestamp& ts) {
  return ts.seconds() >= 0 && ts.seconds() <= 253402300799 && ts.nanos() >= 0 &&
         ts.nanos() < 1000000000;
}

absl::Time TimeOf(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

}  // namespace

absl::StatusOr<CostReportShape> ValidateCostReport(const gantry::v1::GetCostReportRequest& request,
                                                   absl::Time now) {
  CostReportShape shape;
  for (int i = 0; i < request.group_by_size(); ++i) {
    const std::string& g = request.group_by(i);
    bool* flag = g == "tenant"  ? &shape.by_tenant
                 : g == "pool"  ? &shape.by_pool
                 : g == "model" ? &shape.by_model
                 : g == "day"   ? &shape.by_day
                                : nullptr;
    const std::string field = absl::StrCat("group_by[", i, "]");
    if (flag == nullptr) {
      return checks::Invalid(field, absl::StrCat("\"", BoundedField(g),
                                                 "\" is not a group; use tenant, pool, model or "
                                                 "day (any subset, each once)"));
    }
    if (*flag)
      return checks::Invalid(field, absl::StrCat("\"", BoundedField(g), "\" is given twice"));
    *flag = true;
  }
  if (request.has_start_time() && !ValidTimestamp(request.start_time())) {
    return checks::Invalid("start_time", "is not a valid time between 1970 and 9999");
  }
  if (request.has_end_time() && !ValidTimestamp(request.end_time())) {
    return checks::Invalid("end_time", "is not a valid time between 1970 and 9999");
  }
  shape.start =
      request.has_start_time() ? TimeOf(request.start_time()) : BudgetGate::MonthStart(now);
  shape.end = request.has_end_time() ? TimeOf(request.end_time()) : now;
  if (shape.start >= shape.end) {
    return checks::Invalid(
        "start_time",
        absl::StrCat("(", absl::FormatTime(shape.start, absl::UTCTimeZone()),
                     ") is not before end_time (", absl::FormatTime(shape.end, absl::UTCTimeZone()),
                     "); give a start before the end"));
  }
  if (shape.end - shape.start > absl::Hours(24 * kMaxCostReportDays)) {
    return checks::Invalid("end_time",
                           absl::StrCat("the range covers more than ", kMaxCostReportDays,
                                        " days; ask for shorter ranges"));
  }
  return shape;
}

}  // namespace gantry::server
