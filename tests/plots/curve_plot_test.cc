#include "clients/plots/curve_plot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tests/plots/decoded_image.h"

namespace gantry::plots {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Three metrics falling over ten checkpoints towards their floors.
CurvePlot Curve() {
  CurvePlot p;
  p.title = "ele:3  validation curve";
  p.subtitle = "10 validated checkpoints";
  p.x_label = "training step";
  p.y_label = "relative error";
  for (const char* name : {"mre_sampling_fraction", "eprof_longitudinal", "fom"}) {
    CurveSeries s;
    s.label = name;
    const double scale = 0.1 * (p.series.size() + 1);
    for (int e = 1; e <= 10; ++e) {
      s.x.push_back(100 * e);
      s.y.push_back(scale / e + 0.01);
      s.floor_x.push_back(100 * e);
      s.floor_y.push_back(0.004 * (p.series.size() + 1));
    }
    p.series.push_back(s);
  }
  return p;
}

bool Exactly(uint32_t color, uint32_t rgb) { return rgb == color; }

TEST(CurvePlotTest, EachSeriesHasInkInThePlotAndAnEntryInTheLegend) {
  const RenderOptions options;
  const CurvePlot plot = Curve();
  absl::StatusOr<std::string> png = RenderCurvePlot(plot, options);
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const Image image = Decode(*png);
  ASSERT_EQ(image.width, options.width);
  ASSERT_EQ(image.height, options.height);
  const CurveLayout l = CurveLayoutFor(plot, options);
  ASSERT_LT(l.top, l.bottom);
  ASSERT_LE(l.bottom, l.legend_top);
  ASSERT_LE(l.legend_bottom, options.height);
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const uint32_t color = SeriesColor(i);
    const auto match = [color](uint32_t rgb) { return Exactly(color, rgb); };
    // Markers (10 filled circles) and lines inside the plot area; a marker in the legend.
    EXPECT_GT(Count(image, l.left, l.top, l.right, l.bottom, match), 200) << i;
    EXPECT_GT(Count(image, l.legend_left, l.legend_top, l.legend_right, l.legend_bottom, match), 20)
        << i;
  }
  // A colour no series has is nowhere.
  const uint32_t unused = SeriesColor(5);
  EXPECT_EQ(Count(image, 0, 0, options.width, options.height,
                  [unused](uint32_t rgb) { return rgb == unused; }),
            0);
  // Text in the margins (title) and the legend (labels, black).
  EXPECT_GT(Count(image, 0, 0, options.width, l.top, [](uint32_t rgb) { return rgb == 0; }), 50);
  EXPECT_GT(Count(image, l.legend_left, l.legend_top, l.legend_right, l.legend_bottom,
                  [](uint32_t rgb) { return rgb == 0; }),
            100);
}

TEST(CurvePlotTest, TheFloorIsDrawnDashed) {
  // Only a floor far below the metric: its colour appears at the floor's height, with gaps.
  CurvePlot plot = Curve();
  plot.series.resize(1);
  plot.series[0].y.assign(10, 0.5);
  plot.series[0].floor_y.assign(10, 0.002);
  const RenderOptions options;
  absl::StatusOr<std::string> png = RenderCurvePlot(plot, options);
  ASSERT_TRUE(png.ok()) << png.status();
  const Image image = Decode(*png);
  const CurveLayout l = CurveLayoutFor(plot, options);
  // The lower half of the plot holds only the floor: coloured pixels in runs with white gaps.
  const double mid = (l.top + l.bottom) / 2;
  int coloured_columns = 0, columns = 0;
  for (int x = static_cast<int>(l.left) + 40; x < static_cast<int>(l.right) - 40; ++x) {
    ++columns;
    for (int y = static_cast<int>(mid); y < static_cast<int>(l.bottom) - 3; ++y) {
      const uint32_t rgb = image.At(x, y);
      if (rgb != 0xffffff && ((rgb >> 16) & 0xff) < 0xa0) {
        ++coloured_columns;
        break;
      }
    }
  }
  EXPECT_GT(coloured_columns, columns / 3);
  EXPECT_LT(coloured_columns, columns * 9 / 10);  // gaps: dashed, not solid
}

TEST(CurvePlotTest, SameInputSameBytesAndSvg) {
  const RenderOptions options;
  absl::StatusOr<std::string> a = RenderCurvePlot(Curve(), options);
  absl::StatusOr<std::string> b = RenderCurvePlot(Curve(), options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  CurvePlot changed = Curve();
  changed.series[1].y[4] *= 3;
  absl::StatusOr<std::string> c = RenderCurvePlot(changed, options);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(*a, *c);

  RenderOptions svg_options;
  svg_options.format = ImageFormat::kSvg;
  absl::StatusOr<std::string> svg = RenderCurvePlot(Curve(), svg_options);
  absl::StatusOr<std::string> svg_again = RenderCurvePlot(Curve(), svg_options);
  ASSERT_TRUE(svg.ok() && svg_again.ok());
  EXPECT_THAT(*svg, HasSubstr("<svg"));
  EXPECT_EQ(*svg, *svg_again);
}

TEST(CurvePlotTest, OnePointLinearScaleAndHostileTextStillDraw) {
  CurvePlot plot;
  plot.title = std::string("ele\xff\x01:3 ") + std::string(500, 'x');
  plot.x_label = "training step";
  plot.log_y = false;
  CurveSeries s;
  s.label = "fom\xc3";
  s.x = {0};
  s.y = {0};  // zero is fine on a linear scale
  plot.series.push_back(s);
  absl::StatusOr<std::string> png = RenderCurvePlot(plot, RenderOptions());
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ(Decode(*png).width, RenderOptions().width);
  // The largest plot allowed draws.
  CurvePlot big;
  for (size_t i = 0; i < kMaxCurveSeries; ++i) {
    CurveSeries series;
    series.label = "m";
    for (size_t k = 0; k < kMaxCurvePoints; ++k) {
      series.x.push_back(k);
      series.y.push_back(1e-3 + 1e-4 * ((k * 7 + i) % 13));
    }
    big.series.push_back(series);
  }
  EXPECT_TRUE(RenderCurvePlot(big, RenderOptions()).ok());
}

TEST(CurvePlotTest, BadCurvesAreRefused) {
  const auto message = [](const CurvePlot& p) {
    absl::Status s = CheckCurvePlot(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  EXPECT_EQ(message(CurvePlot()), "no series to plot");
  CurvePlot p = Curve();
  p.series[0].y[3] = std::nan("");
  EXPECT_THAT(message(p), HasSubstr("a value is NaN or infinite"));
  p = Curve();
  p.series[2].floor_y[0] = INFINITY;
  EXPECT_THAT(message(p), HasSubstr("series 3 \"fom\" floor: a value is NaN or infinite"));
  p = Curve();
  p.series[0].y[0] = -0.1;
  EXPECT_THAT(message(p), HasSubstr("a value is negative"));
  p = Curve();
  p.series[1].y[0] = 0;
  EXPECT_THAT(message(p), HasSubstr("a value is zero on a log scale"));
  p = Curve();
  p.series[0].x[5] = 1;
  EXPECT_THAT(message(p), HasSubstr("x values are not in increasing order"));
  p = Curve();
  p.series[0].x[5] = NAN;
  EXPECT_THAT(message(p), HasSubstr("an x value is not finite"));
  p = Curve();
  p.series[0].x.pop_back();
  EXPECT_THAT(message(p), HasSubstr("9 x values for 10 values"));
  p = Curve();
  p.series[0].x.clear();
  p.series[0].y.clear();
  EXPECT_THAT(message(p), HasSubstr("no points"));
  p = Curve();
  p.series.resize(kMaxCurveSeries + 1, p.series[0]);
  EXPECT_THAT(message(p), StartsWith("9 series; at most 8"));
  p = Curve();
  p.series[0].x.assign(kMaxCurvePoints + 1, 1.0);
  p.series[0].y.assign(kMaxCurvePoints + 1, 0.5);
  EXPECT_THAT(message(p), HasSubstr("1001 points; at most 1000"));
  p = Curve();
  p.series[0].label = "\x1b[31m";
  p.series[0].y[0] = NAN;
  EXPECT_THAT(message(p), HasSubstr("series 1 \"?[31m\""));
  // Rendering refuses the same, and a size out of range.
  EXPECT_EQ(RenderCurvePlot(CurvePlot(), RenderOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
  RenderOptions tiny;
  tiny.width = 10;
  EXPECT_EQ(RenderCurvePlot(Curve(), tiny).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::plots
