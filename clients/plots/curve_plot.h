// CurvePlot: validation metrics against training step (one coloured line with markers per metric,
// its statistical floor dashed in the same colour, a legend) and its rendering to PNG or SVG with
// Cairo. Pure functions of their input, thread-safe.
#ifndef GANTRY_CLIENTS_PLOTS_CURVE_PLOT_H_
#define GANTRY_CLIENTS_PLOTS_CURVE_PLOT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "clients/plots/ratio_plot.h"

namespace gantry::plots {

// Largest number of series one curve plot draws, and of points in one series (or its floor);
// CheckCurvePlot refuses more.
inline constexpr size_t kMaxCurveSeries = 8;
inline constexpr size_t kMaxCurvePoints = 1000;

// One metric: its values `y` at the non-decreasing `x`, and optionally its statistical floor
// (`floor_y` at the non-decreasing `floor_x`, drawn dashed); either may be sampled at other x.
struct CurveSeries {
  std::string label;  // e.g. "mre_sampling_fraction"
  std::vector<double> x;
  std::vector<double> y;
  std::vector<double> floor_x;
  std::vector<double> floor_y;
};

struct CurvePlot {
  std::string title;
  std::string subtitle;  // may be empty
  std::string x_label;
  std::string y_label;
  bool log_y = true;
  std::vector<CurveSeries> series;
};

// OK when `plot` can be drawn; else INVALID_ARGUMENT saying what is wrong: no series, more than
// kMaxCurveSeries series, a series without points or with more than kMaxCurvePoints, lengths that
// disagree, x not finite or decreasing, a value NaN, infinite, negative, or zero on a log scale.
absl::Status CheckCurvePlot(const CurvePlot& plot);

// The encoded image (PNG bytes or SVG text). Checks the plot first (CheckCurvePlot) and the size
// (300..4000 on each side); server text is drawn as printable ASCII; the same input always gives
// the same bytes.
absl::StatusOr<std::string> RenderCurvePlot(const CurvePlot& plot, const RenderOptions& options);

// The plot area and the legend (below the plot) in image coordinates (tests look for ink inside).
struct CurveLayout {
  double left, right, top, bottom;                              // the plot area
  double legend_left, legend_right, legend_top, legend_bottom;  // the legend
};
CurveLayout CurveLayoutFor(const CurvePlot& plot, const RenderOptions& options);

// The colour of series `index` as 0xRRGGBB (tests look for it).
unsigned SeriesColor(size_t index);

}  // namespace gantry::plots

#endif  // GANTRY_CLIENTS_PLOTS_CURVE_PLOT_H_
