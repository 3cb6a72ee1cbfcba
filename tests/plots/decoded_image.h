// Image: a PNG decoded back with Cairo, and pixel counts inside a rectangle, for the plot tests.
#ifndef GANTRY_TESTS_PLOTS_DECODED_IMAGE_H_
#define GANTRY_TESTS_PLOTS_DECODED_IMAGE_H_

#include <cairo.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace gantry::plots {

// A decoded PNG (Cairo reads it back).
struct Image {
  int width = 0, height = 0, stride = 0;
  std::vector<uint32_t> pixels;  // 0x00RRGGBB
  uint32_t At(int x, int y) const { return pixels[y * width + x] & 0xffffff; }
};

inline Image Decode(const std::string& png) {
  struct Reader {
    const std::string* bytes;
    size_t offset = 0;
  } reader{&png};
  cairo_surface_t* surface = cairo_image_surface_create_from_png_stream(
      [](void* closure, unsigned char* data, unsigned int length) {
        auto* r = static_cast<Reader*>(closure);
        if (r->offset + length > r->bytes->size()) return CAIRO_STATUS_READ_ERROR;
        std::memcpy(data, r->bytes->data() + r->offset, length);
        r->offset += length;
        return CAIRO_STATUS_SUCCESS;
      },
      &reader);
  Image image;
  if (cairo_surface_status(surface) == CAIRO_STATUS_SUCCESS) {
    cairo_surface_flush(surface);
    image.width = cairo_image_surface_get_width(surface);
    image.height = cairo_image_surface_get_height(surface);
    const int stride = cairo_image_surface_get_stride(surface);
    const unsigned char* data = cairo_image_surface_get_data(surface);
    for (int y = 0; y < image.height; ++y) {
      for (int x = 0; x < image.width; ++x) {
        uint32_t v;
        std::memcpy(&v, data + y * stride + 4 * x, 4);
        image.pixels.push_back(v);
      }
    }
  }
  cairo_surface_destroy(surface);
  return image;
}

// Pixels inside the rectangle (inset by 3 pixels, away from the frame) that `match`.
template <typename Match>
int Count(const Image& image, double left, double top, double right, double bottom, Match match) {
  int n = 0;
  for (int y = static_cast<int>(top) + 3; y < static_cast<int>(bottom) - 3; ++y) {
    for (int x = static_cast<int>(left) + 3; x < static_cast<int>(right) - 3; ++x) {
      n += match(image.At(x, y)) ? 1 : 0;
    }
  }
  return n;
}

}  // namespace gantry::plots

#endif  // GANTRY_TESTS_PLOTS_DECODED_IMAGE_H_
