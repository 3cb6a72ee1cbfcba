#include "clients/plots/canvas.h"

#include <cairo-svg.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace gantry::plots::canvas {
namespace {

constexpr size_t kMaxText = 90;

cairo_status_t AppendBytes(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

// Cairo names the page group after a counter of surfaces in the process ("surface7"); the same
// plot must give the same file, so it is always "surface1" (nothing refers to it).
void NumberSvgSurfaceOne(std::string* svg) {
  const std::string prefix = "<g id=\"surface";
  const size_t start = svg->find(prefix);
  if (start == std::string::npos) return;
  const size_t digits = start + prefix.size();
  const size_t end = svg->find('"', digits);
  if (end == std::string::npos) return;
  svg->replace(digits, end - digits, "1");
}

}  // namespace

std::string Printable(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (out.size() >= kMaxText) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : '?';
  }
  return out;
}

void SetColor(cairo_t* cr, Color c, double alpha) {
  cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha);
}

void SetFont(cairo_t* cr, double size, bool bold) {
  cairo_select_font_face(cr, kFont, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double TextWidth(cairo_t* cr, const std::string& text) {
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text.c_str(), &extents);
  return extents.x_advance;
}

void DrawText(cairo_t* cr, const std::string& text, double x, double y, double align) {
  cairo_move_to(cr, x - align * TextWidth(cr, text), y);
  cairo_show_text(cr, text.c_str());
}

void DrawVerticalLabel(cairo_t* cr, const std::string& text, double x, double y_centre) {
  cairo_save(cr);
  cairo_translate(cr, x, y_centre);
  cairo_rotate(cr, -M_PI / 2);
  DrawText(cr, text, 0, 0, 0.5);
  cairo_restore(cr);
}

double Frame::X(double x) const { return left + (x - x_lo) / (x_hi - x_lo) * (right - left); }

double Frame::Y(double y) const {
  double t;
  if (log_y) {
    if (!(y > 0)) return bottom + 50;  // below the panel (clipped)
    t = (std::log10(y) - std::log10(y_lo)) / (std::log10(y_hi) - std::log10(y_lo));
  } else {
    t = (y - y_lo) / (y_hi - y_lo);
  }
  // Far outside values stay near the panel, so paths keep sane coordinates (they are clipped).
  return std::clamp(bottom - t * (bottom - top), top - 50, bottom + 50);
}

void Frame::Clip(cairo_t* cr) const {
  cairo_rectangle(cr, left, top, right - left, bottom - top);
  cairo_clip(cr);
}

void Circle(cairo_t* cr, double x, double y, double r) {
  cairo_new_sub_path(cr);
  cairo_arc(cr, x, y, r, 0, 2 * M_PI);
  cairo_fill(cr);
}

void Square(cairo_t* cr, double x, double y, double half) {
  cairo_rectangle(cr, x - half, y - half, 2 * half, 2 * half);
  cairo_fill(cr);
}

void ErrorBar(cairo_t* cr, const Frame& f, double x, double lo, double hi) {
  const double px = f.X(x), y0 = f.Y(lo), y1 = f.Y(hi);
  if (std::fabs(y0 - y1) < 1) return;
  cairo_move_to(cr, px, y0);
  cairo_line_to(cr, px, y1);
  cairo_move_to(cr, px - 3, y0);
  cairo_line_to(cr, px + 3, y0);
  cairo_move_to(cr, px - 3, y1);
  cairo_line_to(cr, px + 3, y1);
  cairo_stroke(cr);
}

void DrawFrame(cairo_t* cr, const Frame& f) {
  SetColor(cr, kBlack);
  cairo_set_line_width(cr, 1.2);
  cairo_rectangle(cr, f.left, f.top, f.right - f.left, f.bottom - f.top);
  cairo_stroke(cr);
}

void DrawYTicks(cairo_t* cr, const Frame& f, const AxisTicks& axis, bool skip_top_label) {
  SetColor(cr, kBlack);
  cairo_set_line_width(cr, 1);
  SetFont(cr, kTickFont);
  for (const Tick& t : axis.ticks) {
    const double y = f.Y(t.value);
    cairo_move_to(cr, f.left, y);
    cairo_line_to(cr, f.left + 7, y);
    cairo_move_to(cr, f.right, y);
    cairo_line_to(cr, f.right - 7, y);
    cairo_stroke(cr);
    if (skip_top_label && y < f.top + 6) continue;
    if (t.has_exponent) {
      const std::string exponent = absl::StrCat(t.exponent);
      SetFont(cr, kTickFont * 0.75);
      const double ew = TextWidth(cr, exponent);
      DrawText(cr, exponent, f.left - 6 - ew, y - 1, 0);
      SetFont(cr, kTickFont);
      DrawText(cr, "10", f.left - 7 - ew, y + 5, 1);
    } else {
      DrawText(cr, t.label, f.left - 6, y + 5, 1);
    }
  }
}

void DrawXTicks(cairo_t* cr, const Frame& f, const AxisTicks& axis, bool labels) {
  SetColor(cr, kBlack);
  cairo_set_line_width(cr, 1);
  SetFont(cr, kTickFont);
  for (const Tick& t : axis.ticks) {
    const double x = f.X(t.value);
    cairo_move_to(cr, x, f.bottom);
    cairo_line_to(cr, x, f.bottom - 7);
    cairo_move_to(cr, x, f.top);
    cairo_line_to(cr, x, f.top + 7);
    cairo_stroke(cr);
    if (labels) DrawText(cr, t.label, x, f.bottom + 18, 0.5);
  }
}

absl::StatusOr<std::unique_ptr<Canvas>> Canvas::Create(const RenderOptions& options) {
  if (options.width < 300 || options.width > 4000 || options.height < 300 ||
      options.height > 4000) {
    return absl::InvalidArgumentError("image width and height must be within 300..4000");
  }
  std::unique_ptr<Canvas> canvas(new Canvas(options.format));
  canvas->surface_ =
      options.format == ImageFormat::kSvg
          ? cairo_svg_surface_create_for_stream(AppendBytes, &canvas->bytes_, options.width,
                                                options.height)
          : cairo_image_surface_create(CAIRO_FORMAT_RGB24, options.width, options.height);
  if (cairo_surface_status(canvas->surface_) != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("cairo could not create the surface: ",
                     cairo_status_to_string(cairo_surface_status(canvas->surface_))));
  }
  canvas->cr_ = cairo_create(canvas->surface_);
  cairo_set_source_rgb(canvas->cr_, 1, 1, 1);
  cairo_paint(canvas->cr_);
  return canvas;
}

Canvas::~Canvas() {
  if (cr_ != nullptr) cairo_destroy(cr_);
  if (surface_ != nullptr) cairo_surface_destroy(surface_);
}

absl::StatusOr<std::string> Canvas::Finish() {
  if (cr_ == nullptr) return absl::FailedPreconditionError("the canvas was already finished");
  if (cairo_status(cr_) != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("cairo could not draw the plot: ", cairo_status_to_string(cairo_status(cr_))));
  }
  cairo_destroy(cr_);
  cr_ = nullptr;
  cairo_status_t status = CAIRO_STATUS_SUCCESS;
  if (format_ == ImageFormat::kPng) {
    status = cairo_surface_write_to_png_stream(surface_, AppendBytes, &bytes_);
  } else {
    cairo_surface_finish(surface_);
    status = cairo_surface_status(surface_);
    NumberSvgSurfaceOne(&bytes_);
  }
  if (status != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("cairo could not encode the image: ", cairo_status_to_string(status)));
  }
  return std::move(bytes_);
}

}  // namespace gantry::plots::canvas
