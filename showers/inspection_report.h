// InspectionReport: the bounded text form in which gantry-inspect hands an inspection's result
// (a DatasetInfo or the error) from its sandboxed child process to gantry-server.
#ifndef GANTRY_SHOWERS_INSPECTION_REPORT_H_
#define GANTRY_SHOWERS_INSPECTION_REPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "showers/hdf5_io.h"

namespace gantry::showers {

// Text of at most ~8 KiB: "ok\n" and one "key values" line per field, or "error <code>\n" and
// the message (cut at 4 KiB). The particle is reduced to [A-Za-z0-9_-], at most 32 characters.
std::string FormatInspectionReport(const absl::StatusOr<DatasetInfo>& result);

// The inverse. A reported error comes back as that status; a report that is not well formed
// (missing or repeated keys, numbers out of range, unknown layout) is INTERNAL.
absl::StatusOr<DatasetInfo> ParseInspectionReport(absl::string_view text);

}  // namespace gantry::showers

#endif  // GANTRY_SHOWERS_INSPECTION_REPORT_H_
