#include "clients/plots/ratio_plot.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
using canvas::ErrorBar;
using canvas::Frame;
using canvas::kBlack;
using canvas::kGrey;
using canvas::kLabelFont;
using canvas::kSubtitleFont;
using canvas::kTitleFont;
using canvas::Printable;
using canvas::SetColor;
using canvas::SetFont;
using canvas::Square;
using canvas::TextWidth;

constexpr Color kMc{0.12, 0.35, 0.70};
constexpr Color kMcFill{0.77, 0.85, 0.96};
constexpr Color kGan{0.83, 0.15, 0.10};
constexpr Color kBand{0.86, 0.86, 0.86};

std::vector<double> Centres(const RatioPlot& p) {
  if (p.edges.empty()) return p.x;
  std::vector<double> c;
  for (size_t i = 0; i + 1 < p.edges.size(); ++i) c.push_back(0.5 * (p.edges[i] + p.edges[i + 1]));
  return c;
}

double Err(const std::vector<double>& errors, size_t i) { return errors.empty() ? 0 : errors[i]; }

// The y axis of the main panel: decades for log_y when there is something positive to show.
AxisTicks MainYAxis(const RatioPlot& p, bool* log_y) {
  double max_value = 0, min_positive = INFINITY, min_value = INFINITY;
  for (size_t i = 0; i < p.reference.size(); ++i) {
    for (double v : {p.reference[i], p.generated[i]}) {
      max_value = std::max(max_value, v);
      min_value = std::min(min_value, v);
      if (v > 0) min_positive = std::min(min_positive, v);
    }
    max_value = std::max({max_value, p.reference[i] + Err(p.reference_error, i),
                          p.generated[i] + Err(p.generated_error, i)});
  }
  *log_y = p.log_y && max_value > 0;
  if (*log_y) {
    // At most six decades below the maximum (empty tails would squeeze the shape), and headroom
    // above it for the legend.
    const double lo = std::max(min_positive * 0.5, max_value * 1e-6);
    return LogTicks(lo, max_value * 8);
  }
  if (!p.edges.empty()) return LinearTicks(0, max_value > 0 ? max_value * 1.3 : 1, 6, true);
  // A point series: the data's range with room below and above (the legend sits top right).
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < p.reference.size(); ++i) {
    lo = std::min({lo, p.reference[i] - Err(p.reference_error, i),
                   p.generated[i] - Err(p.generated_error, i)});
    hi = std::max({hi, p.reference[i] + Err(p.reference_error, i),
                   p.generated[i] + Err(p.generated_error, i)});
  }
  if (!std::isfinite(lo)) return LinearTicks(0, 1, 6, true);
  const double span = std::max(hi - lo, std::fabs(hi) * 0.02);
  return LinearTicks(std::max(0.0, lo - 0.15 * span), hi + 0.45 * span, 6, true);
}

// The Monte Carlo: a filled step histogram with its error band, or squares with error bars.
void DrawReference(cairo_t* cr, const Frame& f, const RatioPlot& p,
                   const std::vector<double>& centres) {
  const size_t n = p.reference.size();
  if (!p.edges.empty()) {
    const double base = f.log_y ? f.bottom + 50 : f.Y(0);
    cairo_move_to(cr, f.X(p.edges[0]), base);
    for (size_t i = 0; i < n; ++i) {
      cairo_line_to(cr, f.X(p.edges[i]), f.Y(p.reference[i]));
      cairo_line_to(cr, f.X(p.edges[i + 1]), f.Y(p.reference[i]));
    }
    cairo_line_to(cr, f.X(p.edges[n]), base);
    cairo_close_path(cr);
    SetColor(cr, kMcFill);
    cairo_fill_preserve(cr);
    SetColor(cr, kMc);
    cairo_set_line_width(cr, 1.6);
    cairo_stroke(cr);
    if (!p.reference_error.empty()) {
      SetColor(cr, kMc, 0.35);
      for (size_t i = 0; i < n; ++i) {
        const double y0 = f.Y(p.reference[i] - p.reference_error[i]);
        const double y1 = f.Y(p.reference[i] + p.reference_error[i]);
        cairo_rectangle(cr, f.X(p.edges[i]), y1, f.X(p.edges[i + 1]) - f.X(p.edges[i]), y0 - y1);
      }
      cairo_fill(cr);
    }
    return;
  }
  SetColor(cr, kMc);
  cairo_set_line_width(cr, 1.4);
  for (size_t i = 0; i < n; ++i) {
    const double e = Err(p.reference_error, i);
    if (e > 0) ErrorBar(cr, f, centres[i], p.reference[i] - e, p.reference[i] + e);
    Square(cr, f.X(centres[i]), f.Y(p.reference[i]), 4.5);
  }
}

// The GAN: points joined by a line, with error bars.
void DrawGenerated(cairo_t* cr, const Frame& f, const RatioPlot& p,
                   const std::vector<double>& centres) {
  const size_t n = p.generated.size();
  SetColor(cr, kGan);
  cairo_set_line_width(cr, 1.3);
  for (size_t i = 0; i < n; ++i) {
    const double y = f.Y(p.generated[i]);
    if (i == 0) {
      cairo_move_to(cr, f.X(centres[i]), y);
    } else {
      cairo_line_to(cr, f.X(centres[i]), y);
    }
  }
  cairo_stroke(cr);
  cairo_set_line_width(cr, 1.4);
  for (size_t i = 0; i < n; ++i) {
    const double e = Err(p.generated_error, i);
    if (e > 0) ErrorBar(cr, f, centres[i], p.generated[i] - e, p.generated[i] + e);
    if (n <= 200) Circle(cr, f.X(centres[i]), f.Y(p.generated[i]), 3.5);
  }
}

void DrawLegend(cairo_t* cr, const Frame& f, const RatioPlot& p) {
  SetFont(cr, kLabelFont);
  const std::string mc = Printable(p.reference_label), gan = Printable(p.generated_label);
  const std::string band =
      "GAN/MC \xc2\xb1"
      "5%";
  const double width = std::max({TextWidth(cr, mc), TextWidth(cr, gan), TextWidth(cr, band)}) + 52;
  const double x = f.right - width - 10, y = f.top + 10, row = 24;
  cairo_rectangle(cr, x, y, width, 3 * row + 10);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_fill_preserve(cr);
  SetColor(cr, kGrey);
  cairo_set_line_width(cr, 0.8);
  cairo_stroke(cr);
  const double sx = x + 10, y1 = y + 5 + row / 2, y2 = y1 + row, y3 = y2 + row;
  if (!p.edges.empty()) {
    cairo_rectangle(cr, sx, y1 - 7, 26, 14);
    SetColor(cr, kMcFill);
    cairo_fill_preserve(cr);
    SetColor(cr, kMc);
    cairo_set_line_width(cr, 1.6);
    cairo_stroke(cr);
  } else {
    SetColor(cr, kMc);
    Square(cr, sx + 13, y1, 4.5);
  }
  SetColor(cr, kGan);
  cairo_set_line_width(cr, 1.3);
  cairo_move_to(cr, sx, y2);
  cairo_line_to(cr, sx + 26, y2);
  cairo_stroke(cr);
  Circle(cr, sx + 13, y2, 3.5);
  SetColor(cr, kBand);
  cairo_rectangle(cr, sx, y3 - 5, 26, 10);
  cairo_fill(cr);
  SetColor(cr, kBlack);
  DrawText(cr, mc, sx + 34, y1 + 5, 0);
  DrawText(cr, gan, sx + 34, y2 + 5, 0);
  DrawText(cr, band, sx + 34, y3 + 5, 0);
}

// GAN/MC per entry with the errors of both propagated; entries with no Monte Carlo are left out.
struct Ratio {
  double x, value, error;
};
std::vector<Ratio> Ratios(const RatioPlot& p, const std::vector<double>& centres) {
  std::vector<Ratio> out;
  for (size_t i = 0; i < p.reference.size(); ++i) {
    const double r = p.reference[i], g = p.generated[i];
    if (!(r > 0)) continue;
    const double er = Err(p.reference_error, i), eg = Err(p.generated_error, i);
    const double value = g / r;
    const double error = std::hypot(eg / r, value * er / r);
    if (std::isfinite(value) && std::isfinite(error)) out.push_back({centres[i], value, error});
  }
  return out;
}

void DrawRatioPanel(cairo_t* cr, Frame f, const std::vector<Ratio>& ratios) {
  double lo = 0.9, hi = 1.1;
  for (const Ratio& r : ratios) {
    lo = std::min(lo, r.value - r.error);
    hi = std::max(hi, r.value + r.error);
  }
  // A margin, so that points do not sit on the frame; ratios below 0 cannot be, and above 2.5 the
  // panel would say nothing about the agreement near 1 (those points become triangles).
  const double margin = 0.06 * (hi - lo);
  lo = std::max(lo - margin, 0.0);
  hi = std::min(hi + margin, 2.5);
  const AxisTicks axis = LinearTicks(lo, hi, 4, true);
  f.y_lo = axis.lo;
  f.y_hi = axis.hi;
  f.log_y = false;

  cairo_save(cr);
  f.Clip(cr);
  SetColor(cr, kBand);
  cairo_rectangle(cr, f.left, f.Y(1.05), f.right - f.left, f.Y(0.95) - f.Y(1.05));
  cairo_fill(cr);
  SetColor(cr, kBlack);
  cairo_set_line_width(cr, 1);
  const double dash[] = {6, 4};
  cairo_set_dash(cr, dash, 2, 0);
  cairo_move_to(cr, f.left, f.Y(1));
  cairo_line_to(cr, f.right, f.Y(1));
  cairo_stroke(cr);
  cairo_set_dash(cr, nullptr, 0, 0);
  SetColor(cr, kGan);
  cairo_set_line_width(cr, 1.4);
  for (const Ratio& r : ratios) {
    const double px = f.X(r.x);
    if (r.value > f.y_hi || r.value < f.y_lo) {
      // Off the scale: a triangle at the edge pointing to where the value is.
      const bool up = r.value > f.y_hi;
      const double edge = up ? f.top + 2 : f.bottom - 2, tip = up ? -1 : 1;
      cairo_move_to(cr, px, edge);
      cairo_line_to(cr, px - 5, edge - tip * 9);
      cairo_line_to(cr, px + 5, edge - tip * 9);
      cairo_close_path(cr);
      cairo_fill(cr);
      continue;
    }
    if (r.error > 0) ErrorBar(cr, f, r.x, r.value - r.error, r.value + r.error);
    if (ratios.size() <= 200) Circle(cr, px, f.Y(r.value), 3.2);
  }
  cairo_restore(cr);
  DrawFrame(cr, f);
  DrawYTicks(cr, f, axis, true);
}

}  // namespace

absl::Status CheckRatioPlot(const RatioPlot& p) {
  const size_t n = p.reference.size();
  if (n == 0) return absl::InvalidArgumentError("no entries to plot");
  if (n > kMaxPlotBins) {
    return absl::InvalidArgumentError(
        absl::StrCat(n, " entries; at most ", kMaxPlotBins, " are plotted"));
  }
  if (p.generated.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("reference has ", n, " entries but generated has ", p.generated.size()));
  }
  for (const auto* errors : {&p.reference_error, &p.generated_error}) {
    if (!errors->empty() && errors->size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("errors have ", errors->size(), " entries, not ", n));
    }
  }
  const std::vector<double>* positions = &p.edges;
  if (!p.edges.empty()) {
    if (p.edges.size() != n + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(p.edges.size(), " bin edges for ", n, " bins (need ", n + 1, ")"));
    }
    if (!p.x.empty()) return absl::InvalidArgumentError("both bin edges and x values given");
  } else {
    if (p.x.size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("no bin edges and ", p.x.size(), " x values for ", n, " entries"));
    }
    positions = &p.x;
  }
  for (size_t i = 0; i < positions->size(); ++i) {
    const double v = (*positions)[i];
    if (!std::isfinite(v)) return absl::InvalidArgumentError("a bin edge or x value is not finite");
    // Edges increase; x values of a point series may repeat (e.g. one point per angle bin).
    const bool ordered =
        p.edges.empty() ? v >= (*positions)[i - (i > 0)] : (i == 0 || v > (*positions)[i - 1]);
    if (!ordered) {
      return absl::InvalidArgumentError(p.edges.empty() ? "x values are not in increasing order"
                                                        : "bin edges are not increasing");
    }
  }
  for (const auto* values : {&p.reference, &p.generated, &p.reference_error, &p.generated_error}) {
    for (double v : *values) {
      if (!std::isfinite(v)) return absl::InvalidArgumentError("a value is NaN or infinite");
      if (v < 0) return absl::InvalidArgumentError("a value is negative");
    }
  }
  return absl::OkStatus();
}

PanelLayout LayoutFor(const RenderOptions& o) {
  PanelLayout l;
  l.left = 95;
  l.right = o.width - 25;
  l.main_top = 78;
  const double bottom_margin = 62, gap = 8;
  const double avail = o.height - l.main_top - bottom_margin - gap;
  l.main_bottom = l.main_top + std::round(avail * 0.7);
  l.ratio_top = l.main_bottom + gap;
  l.ratio_bottom = o.height - bottom_margin;
  return l;
}

absl::StatusOr<std::string> RenderRatioPlot(const RatioPlot& p, const RenderOptions& options) {
  if (absl::Status s = CheckRatioPlot(p); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<canvas::Canvas>> image = canvas::Canvas::Create(options);
  if (!image.ok()) return image.status();
  cairo_t* cr = (*image)->cr();

  const PanelLayout layout = LayoutFor(options);
  const std::vector<double> centres = Centres(p);
  AxisTicks x_axis;
  if (!p.edges.empty()) {
    x_axis = LinearTicks(p.edges.front(), p.edges.back(), 8, false);
  } else {
    const double span = std::max(p.x.back() - p.x.front(), std::fabs(p.x.back()) * 0.1);
    x_axis = LinearTicks(p.x.front() - 0.08 * span, p.x.back() + 0.08 * span, 8, false);
  }
  bool log_y = false;
  const AxisTicks y_axis = MainYAxis(p, &log_y);
  const Frame main{layout.left,        layout.right, layout.main_top,
                   layout.main_bottom, x_axis.lo,    x_axis.hi,
                   y_axis.lo,          y_axis.hi,    log_y};
  Frame ratio = main;
  ratio.top = layout.ratio_top;
  ratio.bottom = layout.ratio_bottom;

  cairo_save(cr);
  main.Clip(cr);
  DrawReference(cr, main, p, centres);
  DrawGenerated(cr, main, p, centres);
  cairo_restore(cr);
  DrawFrame(cr, main);
  DrawYTicks(cr, main, y_axis);
  DrawXTicks(cr, main, x_axis, false);
  DrawLegend(cr, main, p);

  DrawRatioPanel(cr, ratio, Ratios(p, centres));
  DrawXTicks(cr, ratio, x_axis, true);

  SetColor(cr, kBlack);
  SetFont(cr, kLabelFont);
  DrawText(cr, Printable(p.x_label), layout.right, options.height - 18, 1);
  DrawVerticalLabel(cr, Printable(p.y_label), 22, (main.top + main.bottom) / 2);
  DrawVerticalLabel(cr, "GAN / MC", 22, (ratio.top + ratio.bottom) / 2);
  SetFont(cr, kTitleFont, true);
  DrawText(cr, Printable(p.title), layout.left, 30, 0);
  SetFont(cr, kSubtitleFont);
  SetColor(cr, kGrey);
  DrawText(cr, Printable(p.subtitle), layout.left, 54, 0);

  return (*image)->Finish();
}

}  // namespace gantry::plots
