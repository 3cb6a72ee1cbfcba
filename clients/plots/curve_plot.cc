#include "clients/plots/curve_plot.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "clients/plots/axis_ticks.h"
#include "clients/plots/canvas.h"

namespace gantry::plots {
namespace {

using canvas::Circle;
using canvas::Color;
using canvas::DrawFrame;
using canvas::DrawText;
using canvas::DrawVerticalLabel;
using canvas::DrawXTicks;
using canvas::DrawYTicks;
using canvas::Frame;
using canvas::kBlack;
using canvas::kGrey;
using canvas::kLabelFont;
using canvas::kSubtitleFont;
using canvas::kTitleFont;
using canvas::Printable;
using canvas::SetColor;
using canvas::SetFont;

// Well-separated colours (the Tableau palette), one per series.
constexpr unsigned kPalette[kMaxCurveSeries] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728,
                                                0x9467bd, 0x8c564b, 0xe377c2, 0x17becf};
constexpr double kLegendRow = 22;
constexpr double kDash[] = {7, 4};
constexpr double kMarker = 3.5;
constexpr size_t kMaxMarkers = 200;  // more points: a line without markers

Color ColorOf(size_t index) {
  const unsigned c = SeriesColor(index);
  return {((c >> 16) & 0xff) / 255.0, ((c >> 8) & 0xff) / 255.0, (c & 0xff) / 255.0};
}

// Legend entries: one per series, then the note on the dashed floors when any series has one.
size_t LegendEntries(const CurvePlot& p) {
  const bool floors = std::any_of(p.series.begin(), p.series.end(),
                                  [](const CurveSeries& s) { return !s.floor_y.empty(); });
  return std::min(p.series.size(), kMaxCurveSeries) + (floors ? 1 : 0);
}

absl::Status CheckValues(const std::string& what, const std::vector<double>& x,
                         const std::vector<double>& y, bool log_y) {
  if (x.size() != y.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", x.size(), " x values for ", y.size(), " values"));
  }
  if (x.size() > kMaxCurvePoints) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", x.size(), " points; at most ", kMaxCurvePoints, " are plotted"));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]))
      return absl::InvalidArgumentError(what + ": an x value is not finite");
    if (i > 0 && x[i] < x[i - 1]) {
      return absl::InvalidArgumentError(what + ": x values are not in increasing order");
    }
    if (!std::isfinite(y[i]))
      return absl::InvalidArgumentError(what + ": a value is NaN or infinite");
    if (y[i] < 0) return absl::InvalidArgumentError(what + ": a value is negative");
    if (log_y && y[i] == 0) {
      return absl::InvalidArgumentError(what + ": a value is zero on a log scale");
    }
  }
  return absl::OkStatus();
}

// The y axis: on a log scale at least 1e-3..1 (relative errors), widened to the data (at most
// eight decades below the largest value); on a linear scale from 0.
AxisTicks YAxis(const CurvePlot& p) {
  double max_value = 0, min_positive = INFINITY;
  for (const CurveSeries& s : p.series) {
    for (const auto* values : {&s.y, &s.floor_y}) {
      for (double v : *values) {
        max_value = std::max(max_value, v);
        if (v > 0) min_positive = std::min(min_positive, v);
      }
    }
  }
  if (!p.log_y) return LinearTicks(0, max_value > 0 ? max_value * 1.1 : 1, 6, true);
  const double hi = std::max(1.0, max_value * 1.3);
  const double lo = std::max(std::min(1e-3, min_positive * 0.7), hi * 1e-8);
  return LogTicks(lo, hi);
}

AxisTicks XAxis(const CurvePlot& p) {
  double lo = INFINITY, hi = -INFINITY;
  for (const CurveSeries& s : p.series) {
    for (const auto* values : {&s.x, &s.floor_x}) {
      for (double v : *values) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  // A single step (or steps close together) gets a range of at least 10 steps (or 10% of the
  // step) around it, so that the ticks are whole steps.
  const double min_span = std::max(std::fabs(hi) * 0.1, 10.0);
  if (hi - lo < min_span) {
    const double centre = 0.5 * (lo + hi);
    lo = centre - 0.5 * min_span;
    hi = centre + 0.5 * min_span;
  }
  const double pad = 0.05 * (hi - lo);
  return LinearTicks(lo - pad, hi + pad, 8, false);
}

// A polyline through the points (a short horizontal mark for a single point).
void Polyline(cairo_t* cr, const Frame& f, const std::vector<double>& x,
              const std::vector<double>& y) {
  if (x.size() == 1) {
    cairo_move_to(cr, f.X(x[0]) - 10, f.Y(y[0]));
    cairo_line_to(cr, f.X(x[0]) + 10, f.Y(y[0]));
  }
  for (size_t i = 0; i < x.size() && x.size() > 1; ++i) {
    if (i == 0) {
      cairo_move_to(cr, f.X(x[i]), f.Y(y[i]));
    } else {
      cairo_line_to(cr, f.X(x[i]), f.Y(y[i]));
    }
  }
  cairo_stroke(cr);
}

void DrawSeries(cairo_t* cr, const Frame& f, const CurveSeries& s, Color color) {
  SetColor(cr, color);
  if (!s.floor_y.empty()) {
    cairo_set_line_width(cr, 1.4);
    cairo_set_dash(cr, kDash, 2, 0);
    Polyline(cr, f, s.floor_x, s.floor_y);
    cairo_set_dash(cr, nullptr, 0, 0);
  }
  cairo_set_line_width(cr, 1.8);
  if (s.x.size() > 1) Polyline(cr, f, s.x, s.y);
  if (s.x.size() <= kMaxMarkers) {
    for (size_t i = 0; i < s.x.size(); ++i) Circle(cr, f.X(s.x[i]), f.Y(s.y[i]), kMarker);
  }
}

void DrawLegend(cairo_t* cr, const CurveLayout& l, const CurvePlot& p) {
  const size_t entries = LegendEntries(p);
  const size_t rows = (entries + 1) / 2;
  const double column = (l.legend_right - l.legend_left) / 2;
  SetFont(cr, kLabelFont);
  for (size_t e = 0; e < entries; ++e) {
    // Column-major: the first half of the entries on the left.
    const double x = l.legend_left + 8 + (e / rows) * column;
    const double y = l.legend_top + 5 + kLegendRow * (e % rows + 0.5);
    if (e < p.series.size()) {
      SetColor(cr, ColorOf(e));
      cairo_set_line_width(cr, 1.8);
      cairo_move_to(cr, x, y);
      cairo_line_to(cr, x + 28, y);
      cairo_stroke(cr);
      Circle(cr, x + 14, y, kMarker);
      SetColor(cr, kBlack);
      DrawText(cr, Printable(p.series[e].label), x + 36, y + 5, 0);
    } else {
      SetColor(cr, kGrey);
      cairo_set_line_width(cr, 1.4);
      cairo_set_dash(cr, kDash, 2, 0);
      cairo_move_to(cr, x, y);
      cairo_line_to(cr, x + 28, y);
      cairo_stroke(cr);
      cairo_set_dash(cr, nullptr, 0, 0);
      SetColor(cr, kBlack);
      DrawText(cr, "dashed: statistical floor (<metric>_null)", x + 36, y + 5, 0);
    }
  }
}

}  // namespace

unsigned SeriesColor(size_t index) { return kPalette[index % kMaxCurveSeries]; }

absl::Status CheckCurvePlot(const CurvePlot& p) {
  if (p.series.empty()) return absl::InvalidArgumentError("no series to plot");
  if (p.series.size() > kMaxCurveSeries) {
    return absl::InvalidArgumentError(
        absl::StrCat(p.series.size(), " series; at most ", kMaxCurveSeries, " are plotted"));
  }
  for (size_t i = 0; i < p.series.size(); ++i) {
    const CurveSeries& s = p.series[i];
    const std::string what = absl::StrCat("series ", i + 1, " \"", Printable(s.label), "\"");
    if (s.y.empty()) return absl::InvalidArgumentError(what + ": no points");
    if (absl::Status st = CheckValues(what, s.x, s.y, p.log_y); !st.ok()) return st;
    if (absl::Status st = CheckValues(what + " floor", s.floor_x, s.floor_y, p.log_y); !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

CurveLayout CurveLayoutFor(const CurvePlot& plot, const RenderOptions& o) {
  const size_t rows = (LegendEntries(plot) + 1) / 2;
  CurveLayout l;
  l.left = 95;
  l.right = o.width - 25;
  l.top = 78;
  l.legend_bottom = o.height - 10;
  l.legend_top = l.legend_bottom - (rows * kLegendRow + 10);
  l.legend_left = l.left;
  l.legend_right = l.right;
  // Below the plot: tick labels, then the axis label, then the legend.
  l.bottom = std::max(l.top + 100, l.legend_top - 50);
  return l;
}

absl::StatusOr<std::string> RenderCurvePlot(const CurvePlot& p, const RenderOptions& options) {
  if (absl::Status s = CheckCurvePlot(p); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<canvas::Canvas>> image = canvas::Canvas::Create(options);
  if (!image.ok()) return image.status();
  cairo_t* cr = (*image)->cr();

  const CurveLayout layout = CurveLayoutFor(p, options);
  const AxisTicks x_axis = XAxis(p);
  const AxisTicks y_axis = YAxis(p);
  const Frame frame{layout.left, layout.right, layout.top, layout.bottom, x_axis.lo,
                    x_axis.hi,   y_axis.lo,    y_axis.hi,  p.log_y};

  cairo_save(cr);
  frame.Clip(cr);
  // Floors first under every metric, then the metrics, so no floor hides a measured point.
  for (size_t i = 0; i < p.series.size(); ++i) {
    CurveSeries floor_only = p.series[i];
    floor_only.x.clear();
    floor_only.y.clear();
    DrawSeries(cr, frame, floor_only, ColorOf(i));
  }
  for (size_t i = 0; i < p.series.size(); ++i) {
    CurveSeries metric_only = p.series[i];
    metric_only.floor_x.clear();
    metric_only.floor_y.clear();
    DrawSeries(cr, frame, metric_only, ColorOf(i));
  }
  cairo_restore(cr);
  DrawFrame(cr, frame);
  DrawYTicks(cr, frame, y_axis);
  DrawXTicks(cr, frame, x_axis, true);
  DrawLegend(cr, layout, p);

  SetColor(cr, kBlack);
  SetFont(cr, kLabelFont);
  DrawText(cr, Printable(p.x_label), layout.right, layout.bottom + 40, 1);
  DrawVerticalLabel(cr, Printable(p.y_label), 22, (layout.top + layout.bottom) / 2);
  SetFont(cr, kTitleFont, true);
  DrawText(cr, Printable(p.title), layout.left, 30, 0);
  SetFont(cr, kSubtitleFont);
  SetColor(cr, kGrey);
  DrawText(cr, Printable(p.subtitle), layout.left, 54, 0);
  return (*image)->Finish();
}

}  // namespace gantry::plots
