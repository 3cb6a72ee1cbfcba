// Canvas: the Cairo drawing primitives the figures of clients/plots share (colours, fonts, text,
// a data-to-pixel Frame, axes and ticks, markers) and the PNG/SVG surface that encodes a figure.
// Internal to clients/plots (it includes Cairo, which stays private to this folder). A Canvas is
// used by one thread at a time; the free functions are thread-safe for distinct cairo_t.
#ifndef GANTRY_CLIENTS_PLOTS_CANVAS_H_
#define GANTRY_CLIENTS_PLOTS_CANVAS_H_

#include <cairo.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "clients/plots/axis_ticks.h"
#include "clients/plots/ratio_plot.h"

namespace gantry::plots::canvas {

struct Color {
  double r, g, b;
};
inline constexpr Color kBlack{0, 0, 0};
inline constexpr Color kGrey{0.45, 0.45, 0.45};
inline constexpr char kFont[] = "DejaVu Sans";
inline constexpr double kTickFont = 13, kLabelFont = 15, kTitleFont = 17, kSubtitleFont = 14;

// Text that came from the server, as printable ASCII only (Cairo refuses invalid UTF-8 and stops
// drawing), cut to a length that fits a line.
std::string Printable(const std::string& text);

void SetColor(cairo_t* cr, Color c, double alpha = 1.0);
void SetFont(cairo_t* cr, double size, bool bold = false);
double TextWidth(cairo_t* cr, const std::string& text);
// Draws `text` with its baseline at y; `align` 0 = left, 0.5 = centre, 1 = right of x.
void DrawText(cairo_t* cr, const std::string& text, double x, double y, double align);
// Draws `text` rotated upwards, centred on (x, y_centre).
void DrawVerticalLabel(cairo_t* cr, const std::string& text, double x, double y_centre);

// Maps data coordinates into one panel's rectangle. Values far outside map to just outside the
// rectangle (paths keep sane coordinates; draw clipped). On a log axis, values <= 0 map below it.
struct Frame {
  double left, right, top, bottom;
  double x_lo, x_hi, y_lo, y_hi;
  bool log_y = false;

  double X(double x) const;
  double Y(double y) const;
  void Clip(cairo_t* cr) const;
};

void Circle(cairo_t* cr, double x, double y, double r);
void Square(cairo_t* cr, double x, double y, double half);
// A vertical error bar with small caps.
void ErrorBar(cairo_t* cr, const Frame& f, double x, double lo, double hi);
void DrawFrame(cairo_t* cr, const Frame& f);
// Ticks on both sides with labels left of the frame (10^k on a log axis). `skip_top_label` leaves
// out a label at the frame's top edge (where a panel above has its lowest label).
void DrawYTicks(cairo_t* cr, const Frame& f, const AxisTicks& axis, bool skip_top_label = false);
// Ticks at the bottom and top, labels below the frame when `labels`.
void DrawXTicks(cairo_t* cr, const Frame& f, const AxisTicks& axis, bool labels);

// A white image of `options`' size and format; Finish() encodes it. Owns the Cairo surface.
class Canvas {
 public:
  // INVALID_ARGUMENT when the size is outside 300..4000 on a side; INTERNAL when Cairo fails.
  static absl::StatusOr<std::unique_ptr<Canvas>> Create(const RenderOptions& options);
  ~Canvas();
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  cairo_t* cr() const { return cr_; }

  // The PNG bytes or SVG text (the SVG's page group always named "surface1", so the same drawing
  // gives the same bytes). Call once; the canvas cannot be drawn on afterwards.
  absl::StatusOr<std::string> Finish();

 private:
  explicit Canvas(ImageFormat format) : format_(format) {}

  ImageFormat format_;
  std::string bytes_;
  cairo_surface_t* surface_ = nullptr;
  cairo_t* cr_ = nullptr;
};

}  // namespace gantry::plots::canvas

#endif  // GANTRY_CLIENTS_PLOTS_CANVAS_H_
