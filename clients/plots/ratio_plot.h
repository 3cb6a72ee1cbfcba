// RatioPlot: one "generated over Monte Carlo" figure (a main panel and a GAN/MC ratio panel) and
// its rendering to PNG or SVG with Cairo. Pure functions of their input, thread-safe.
#ifndef GANTRY_CLIENTS_PLOTS_RATIO_PLOT_H_
#define GANTRY_CLIENTS_PLOTS_RATIO_PLOT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gantry::plots {

// Largest number of bins (or points) one plot draws; CheckRatioPlot refuses more.
inline constexpr size_t kMaxPlotBins = 4096;

// What one figure shows. Either binned (`edges` has n+1 increasing values; the Monte Carlo is drawn
// as a filled step histogram) or a point series (`edges` empty, `x` has n non-decreasing values;
// both samples are drawn as points). `reference` and `generated` have n values each; the errors
// (one standard error per entry) are either empty or n values.
struct RatioPlot {
  std::string title;     // first line, e.g. "ele:3  longitudinal profile"
  std::string subtitle;  // second line, e.g. "energy bin 100-110 GeV"; may be empty
  std::string x_label;
  std::string y_label;
  bool log_y = false;
  std::vector<double> edges;
  std::vector<double> x;
  std::vector<double> reference;
  std::vector<double> generated;
  std::vector<double> reference_error;
  std::vector<double> generated_error;
  std::string reference_label = "Monte Carlo";
  std::string generated_label = "GAN";
};

enum class ImageFormat { kPng, kSvg };

// Size of the image in pixels (PNG) or points (SVG).
struct RenderOptions {
  ImageFormat format = ImageFormat::kPng;
  int width = 800;
  int height = 700;
};

// OK when `plot` can be drawn; else INVALID_ARGUMENT saying what is wrong (lengths that disagree,
// more than kMaxPlotBins bins, edges not increasing or x decreasing, a NaN, infinite or negative
// value).
absl::Status CheckRatioPlot(const RatioPlot& plot);

// The encoded image (PNG bytes or SVG text). Checks the plot first (CheckRatioPlot) and the size
// (100..4000 on each side); the same input always gives the same bytes.
absl::StatusOr<std::string> RenderRatioPlot(const RatioPlot& plot, const RenderOptions& options);

// The panels' rectangles in image coordinates for `options` (tests look for ink inside them).
struct PanelLayout {
  double left, right;  // both panels share the x extent
  double main_top, main_bottom;
  double ratio_top, ratio_bottom;
};
PanelLayout LayoutFor(const RenderOptions& options);

}  // namespace gantry::plots

#endif  // GANTRY_CLIENTS_PLOTS_RATIO_PLOT_H_
