#include "clients/plots/ratio_plot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tests/plots/decoded_image.h"

namespace gantry::plots {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A longitudinal-profile-like histogram: 25 layers, a shower rising and falling over 3 decades.
RatioPlot Profile() {
  RatioPlot p;
  p.title = "ele:3  longitudinal profile";
  p.subtitle = "energy bin 100-110 GeV";
  p.x_label = "z slice";
  p.y_label = "mean energy per layer [GeV]";
  p.log_y = true;
  for (int i = 0; i <= 25; ++i) p.edges.push_back(i);
  for (int i = 0; i < 25; ++i) {
    const double mc = 2.0 * std::pow(i + 0.5, 2) * std::exp(-(i + 0.5) / 2.5);
    p.reference.push_back(mc);
    p.generated.push_back(mc * (1.0 + 0.08 * std::sin(i)));
    p.reference_error.push_back(0.03 * mc);
    p.generated_error.push_back(0.04 * mc);
  }
  return p;
}

bool Reddish(uint32_t rgb) {
  const int r = (rgb >> 16) & 0xff, g = (rgb >> 8) & 0xff, b = rgb & 0xff;
  return r > 150 && g < 100 && b < 100;
}
bool Bluish(uint32_t rgb) {
  const int r = (rgb >> 16) & 0xff, b = rgb & 0xff;
  return b > 150 && r < 220 && b > r + 20;
}
bool NotWhite(uint32_t rgb) { return rgb != 0xffffff; }

TEST(RatioPlotTest, WritesAPngOfTheRequestedSizeWithInkInBothPanels) {
  RenderOptions options;
  options.width = 800;
  options.height = 700;
  absl::StatusOr<std::string> png = RenderRatioPlot(Profile(), options);
  ASSERT_TRUE(png.ok()) << png.status();
  ASSERT_GT(png->size(), 8u);
  EXPECT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const Image image = Decode(*png);
  ASSERT_EQ(image.width, 800);
  ASSERT_EQ(image.height, 700);
  const PanelLayout l = LayoutFor(options);
  // Main panel: the Monte Carlo's blue fill and the GAN's red points.
  EXPECT_GT(Count(image, l.left, l.main_top, l.right, l.main_bottom, Bluish), 5000);
  EXPECT_GT(Count(image, l.left, l.main_top, l.right, l.main_bottom, Reddish), 200);
  // Ratio panel: the +-5% band (grey) and the red ratio points.
  EXPECT_GT(Count(image, l.left, l.ratio_top, l.right, l.ratio_bottom, NotWhite), 2000);
  EXPECT_GT(Count(image, l.left, l.ratio_top, l.right, l.ratio_bottom, Reddish), 200);
  // Margins carry the title and labels (text), outside both panels.
  EXPECT_GT(Count(image, 0, 0, 800, l.main_top, NotWhite), 200);
  EXPECT_GT(Count(image, 0, l.main_top, l.left, l.ratio_bottom, NotWhite), 200);
}

TEST(RatioPlotTest, SameInputSameBytes) {
  const RenderOptions options;
  absl::StatusOr<std::string> a = RenderRatioPlot(Profile(), options);
  absl::StatusOr<std::string> b = RenderRatioPlot(Profile(), options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  RatioPlot changed = Profile();
  changed.generated[10] *= 1.5;
  absl::StatusOr<std::string> c = RenderRatioPlot(changed, options);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(*a, *c);
}

TEST(RatioPlotTest, SvgIsAnSvgDocument) {
  RenderOptions options;
  options.format = ImageFormat::kSvg;
  absl::StatusOr<std::string> svg = RenderRatioPlot(Profile(), options);
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_THAT(*svg, StartsWith("<?xml"));
  EXPECT_THAT(*svg, HasSubstr("<svg"));
  EXPECT_THAT(*svg, HasSubstr("width=\"800pt\""));
  absl::StatusOr<std::string> again = RenderRatioPlot(Profile(), options);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*svg, *again);
}

TEST(RatioPlotTest, PointSeriesWithoutErrorsAndLinearScale) {
  RatioPlot p;
  p.title = "ele:1  sampling fraction";
  p.x_label = "E_primary [GeV]";
  p.y_label = "sampling fraction";
  p.x = {15, 55, 105, 155, 195};
  p.reference = {0.021, 0.0212, 0.0209, 0.021, 0.0211};
  p.generated = {0.0126, 0.018, 0.022, 0.0205, 0.025};
  const RenderOptions options;
  absl::StatusOr<std::string> png = RenderRatioPlot(p, options);
  ASSERT_TRUE(png.ok()) << png.status();
  const Image image = Decode(*png);
  const PanelLayout l = LayoutFor(options);
  EXPECT_GT(Count(image, l.left, l.main_top, l.right, l.main_bottom, Bluish), 100);
  EXPECT_GT(Count(image, l.left, l.ratio_top, l.right, l.ratio_bottom, Reddish), 50);
}

TEST(RatioPlotTest, ZerosEmptyMonteCarloBinsAndHostileTextStillDraw) {
  RatioPlot p = Profile();
  p.reference[0] = 0;   // no ratio for this bin
  p.generated[24] = 0;  // nothing to draw on a log scale
  p.reference_error.clear();
  p.generated_error.clear();
  p.title = std::string("\xff\xfe bad utf8 \x01 and a very long title ") + std::string(500, 'x');
  p.x_label = "\xc3";
  absl::StatusOr<std::string> png = RenderRatioPlot(p, RenderOptions());
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ(Decode(*png).width, 800);

  RatioPlot zeros = Profile();
  std::fill(zeros.reference.begin(), zeros.reference.end(), 0.0);
  std::fill(zeros.generated.begin(), zeros.generated.end(), 0.0);
  EXPECT_TRUE(RenderRatioPlot(zeros, RenderOptions()).ok());
}

TEST(RatioPlotTest, BadHistogramsAreRefused) {
  auto refused = [](RatioPlot p, const std::string& why) {
    const absl::Status status = RenderRatioPlot(p, RenderOptions()).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << why;
    EXPECT_EQ(CheckRatioPlot(p).code(), absl::StatusCode::kInvalidArgument) << why;
    return std::string(status.message());
  };
  RatioPlot p = Profile();
  p.generated.pop_back();
  EXPECT_THAT(refused(p, "lengths"), HasSubstr("generated has 24"));
  p = Profile();
  p.reference[3] = NAN;
  EXPECT_THAT(refused(p, "nan"), HasSubstr("NaN"));
  p = Profile();
  p.generated[3] = -1;
  EXPECT_THAT(refused(p, "negative"), HasSubstr("negative"));
  p = Profile();
  p.generated_error[3] = INFINITY;
  EXPECT_THAT(refused(p, "inf error"), HasSubstr("infinite"));
  p = Profile();
  p.reference_error.resize(3);
  EXPECT_THAT(refused(p, "error length"), HasSubstr("errors have 3"));
  p = Profile();
  p.edges.pop_back();
  EXPECT_THAT(refused(p, "edges"), HasSubstr("need 26"));
  p = Profile();
  std::swap(p.edges[3], p.edges[4]);
  EXPECT_THAT(refused(p, "order"), HasSubstr("not increasing"));
  p = RatioPlot();
  p.x = {1, 3, 2};
  p.reference = p.generated = {1, 1, 1};
  EXPECT_THAT(refused(p, "x order"), HasSubstr("x values are not in increasing order"));
  p.x = {1, 2, 2};  // repeated x (angle bins at one energy) is fine
  EXPECT_TRUE(CheckRatioPlot(p).ok());
  p = Profile();
  p.edges.clear();
  EXPECT_THAT(refused(p, "no x"), HasSubstr("no bin edges"));
  p = RatioPlot();
  EXPECT_THAT(refused(p, "empty"), HasSubstr("no entries"));
  p = RatioPlot();
  p.reference.assign(kMaxPlotBins + 1, 1.0);
  p.generated = p.reference;
  for (size_t i = 0; i <= kMaxPlotBins + 1; ++i) p.edges.push_back(i);
  EXPECT_THAT(refused(p, "too many"), HasSubstr("at most 4096"));

  RenderOptions huge;
  huge.width = 100000;
  EXPECT_EQ(RenderRatioPlot(Profile(), huge).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::plots
