// Prometheus text exposition format 0.0.4: the escaping and number rules every writer of a
// /metrics page follows (https://prometheus.io/docs/instrumenting/exposition_formats/).
#ifndef GANTRY_BASE_METRICS_PROMETHEUS_TEXT_H_
#define GANTRY_BASE_METRICS_PROMETHEUS_TEXT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace gantry::metrics {

// The Content-Type of a page in this format.
inline constexpr char kPrometheusTextContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(absl::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved), and not "le" / "quantile" (those
// belong to histograms and summaries).
bool IsValidLabelName(absl::string_view name);

// A label value inside double quotes: backslash, double quote and line feed escaped as \\, \"
// and \n. Bytes that are not valid UTF-8 are replaced with U+FFFD, so a hostile value (a tenant
// name, a method path) cannot make the page unparsable.
std::string EscapeLabelValue(absl::string_view value);
// HELP text: backslash and line feed escaped as \\ and \n (quotes stay as they are).
std::string EscapeHelp(absl::string_view help);
// A sample value: integers without a fraction, others with up to 17 significant digits, and
// "NaN", "+Inf", "-Inf".
std::string FormatSampleValue(double value);

// `{a="x",b="y"}` for the pairs in order, "" when there are none.
std::string FormatLabels(const std::vector<std::pair<std::string, std::string>>& labels);

}  // namespace gantry::metrics

#endif  // GANTRY_BASE_METRICS_PROMETHEUS_TEXT_H_
