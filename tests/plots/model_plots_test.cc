#include "clients/plots/model_plots.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "clients/plots/curve_plot.h"

namespace gantry::plots {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

v1::Histogram* Binned(v1::ModelVersion* model, const std::string& name, const std::string& bin,
                      int n, bool with_errors) {
  v1::Histogram* h = model->add_histograms();
  h->set_name(name);
  h->set_x_label("x [unit]");
  h->set_energy_bin(bin);
  for (int i = 0; i <= n; ++i) h->add_edges(i);
  for (int i = 0; i < n; ++i) {
    const double mc = std::exp(-0.3 * i) + 0.01;
    h->add_reference(mc);
    h->add_generated(mc * 1.05);
    if (with_errors) {
      h->add_reference_error(0.02 * mc);
      h->add_generated_error(0.03 * mc);
    }
  }
  return h;
}

// A model as validation stores it: two energy bins (listed high first), every plotted kind.
v1::ModelVersion Model(bool with_errors, bool with_curve) {
  v1::ModelVersion model;
  model.set_name("ele");
  model.set_version(3);
  for (const char* bin : {"100-200 GeV", "10-100 GeV"}) {
    for (const char* name : {"profile_x", "profile_y", "profile_z", "feature/total_energy",
                             "feature/hits", "sampling_fraction", "cell_energy", "sparsity"}) {
      Binned(&model, name, bin, 25, with_errors);
    }
  }
  if (with_curve) {
    v1::Histogram* h = model.add_histograms();
    h->set_name("sampling_fraction_vs_energy");
    h->set_x_label("E_primary [GeV]");
    for (double x : {55.0, 150.0}) h->add_x(x);
    for (double v : {0.021, 0.0205}) h->add_reference(v);
    for (double v : {0.0126, 0.019}) h->add_generated(v);
    for (double e : {0.0002, 0.0002}) h->add_reference_error(e);
    for (double e : {0.0004, 0.0004}) h->add_generated_error(e);
  }
  v1::Histogram* per_bin = model.add_histograms();
  per_bin->set_name("sampling_fraction_per_bin");
  for (int i = 0; i <= 2; ++i) per_bin->add_edges(i);
  for (double v : {0.021, 0.0205}) per_bin->add_reference(v);
  for (double v : {0.0126, 0.019}) per_bin->add_generated(v);
  return model;
}

struct Written {
  std::map<std::string, std::string> files;
  ModelPlotsReport report;
  absl::Status status;
};

Written Plot(const v1::ModelVersion& model, ModelPlotsOptions options = {}) {
  Written w;
  w.status = WriteModelPlots(
      model, options,
      [&](const std::string& name, const std::string& bytes) {
        EXPECT_EQ(w.files.count(name), 0u) << name << " written twice";
        w.files[name] = bytes;
        return absl::OkStatus();
      },
      &w.report);
  return w;
}

std::vector<std::string> Names(const Written& w) {
  std::vector<std::string> names;
  for (const PlotFile& f : w.report.files) names.push_back(f.file_name);
  return names;
}

TEST(ModelPlotsTest, EveryKindPerEnergyBinOrderedByEnergyAndAnIndex) {
  const Written w = Plot(Model(true, true));
  ASSERT_TRUE(w.status.ok()) << w.status;
  EXPECT_THAT(w.report.warnings, IsEmpty());
  EXPECT_THAT(
      Names(w),
      ElementsAre("sampling_fraction_vs_energy.png", "longitudinal_profile_bin01.png",
                  "transverse_profile_x_bin01.png", "transverse_profile_y_bin01.png",
                  "energy_sum_bin01.png", "hit_count_bin01.png",
                  "sampling_fraction_distribution_bin01.png", "cell_energy_spectrum_bin01.png",
                  "longitudinal_profile_bin02.png", "transverse_profile_x_bin02.png",
                  "transverse_profile_y_bin02.png", "energy_sum_bin02.png", "hit_count_bin02.png",
                  "sampling_fraction_distribution_bin02.png", "cell_energy_spectrum_bin02.png",
                  "index.md"));
  EXPECT_EQ(w.report.files[1].energy_bin, "10-100 GeV");
  EXPECT_EQ(w.report.files[8].energy_bin, "100-200 GeV");
  for (const auto& [name, bytes] : w.files) {
    if (name != "index.md") EXPECT_EQ(bytes.substr(1, 3), "PNG") << name;
  }
  const std::string& index = w.files.at("index.md");
  EXPECT_THAT(index, StartsWith("# Validation plots of ele:3\n"));
  EXPECT_THAT(index, HasSubstr("| [longitudinal_profile_bin01.png](longitudinal_profile_bin01.png) "
                               "| longitudinal profile | 10-100 GeV |"));
  EXPECT_THAT(index, HasSubstr("sampling_fraction_vs_energy.png"));
  EXPECT_THAT(index, Not(HasSubstr("index.md](")));
}

TEST(ModelPlotsTest, OlderModelsWithoutErrorsOrTheCurveUseThePerBinCurve) {
  const Written with_curve = Plot(Model(false, true));
  const Written without = Plot(Model(false, false));
  ASSERT_TRUE(without.status.ok()) << without.status;
  EXPECT_THAT(without.report.warnings, IsEmpty());
  EXPECT_EQ(Names(without), Names(with_curve));
  // Drawn from a different histogram (no errors, x from the bins' labels), so different pixels.
  EXPECT_NE(without.files.at("sampling_fraction_vs_energy.png"),
            with_curve.files.at("sampling_fraction_vs_energy.png"));
  EXPECT_EQ(Plot(Model(false, false)).files, without.files);  // deterministic
}

TEST(ModelPlotsTest, ASamplingFractionCurveInAnyOrderWithRepeatedEnergiesIsSorted) {
  v1::ModelVersion model;
  model.set_name("angles");
  model.set_version(1);
  v1::Histogram* h = model.add_histograms();
  h->set_name("sampling_fraction_vs_energy");
  for (double x : {150.0, 55.0, 150.0}) h->add_x(x);
  for (double v : {0.02, 0.021, 0.0205}) h->add_reference(v);
  for (double v : {0.019, 0.018, 0.02}) h->add_generated(v);
  const Written w = Plot(model);
  ASSERT_TRUE(w.status.ok()) << w.status;
  EXPECT_THAT(w.report.warnings, IsEmpty());
  EXPECT_THAT(Names(w), ElementsAre("sampling_fraction_vs_energy.png", "index.md"));
}

TEST(ModelPlotsTest, SvgFormat) {
  ModelPlotsOptions options;
  options.render.format = ImageFormat::kSvg;
  const Written w = Plot(Model(true, true), options);
  ASSERT_TRUE(w.status.ok()) << w.status;
  EXPECT_EQ(Names(w)[0], "sampling_fraction_vs_energy.svg");
  EXPECT_THAT(w.files.at("energy_sum_bin02.svg"), HasSubstr("<svg"));
}

TEST(ModelPlotsTest, BadHistogramsAreSkippedWithAWarning) {
  v1::ModelVersion model = Model(true, true);
  // Inconsistent lengths, NaN, negative, wrong error length: each skipped, nothing else lost.
  model.mutable_histograms(0)->add_generated(1.0);                       // profile_x, bin 100-200
  model.mutable_histograms(2)->set_reference(4, std::nan(""));           // profile_z, bin 100-200
  model.mutable_histograms(3)->set_generated(0, -2.0);                   // total_energy, 100-200
  model.mutable_histograms(9)->mutable_reference_error()->RemoveLast();  // profile_y, 10-100
  Binned(&model, "profile_z", "10-100 GeV", 25, true);                   // a duplicate
  const Written w = Plot(model);
  ASSERT_TRUE(w.status.ok()) << w.status;
  ASSERT_EQ(w.report.warnings.size(), 5u);
  EXPECT_THAT(w.report.warnings[0],
              HasSubstr("\"profile_x\" [100-200 GeV]: reference has 25 entries but generated has "
                        "26; skipped"));
  EXPECT_THAT(w.report.warnings[1], HasSubstr("\"profile_z\" [100-200 GeV]: a value is NaN"));
  EXPECT_THAT(w.report.warnings[2], HasSubstr("negative"));
  EXPECT_THAT(w.report.warnings[3], HasSubstr("errors have 24 entries"));
  EXPECT_THAT(w.report.warnings[4], HasSubstr("a second histogram of this name and energy bin"));
  EXPECT_EQ(w.files.count("transverse_profile_x_bin02.png"), 0u);
  EXPECT_EQ(w.files.count("longitudinal_profile_bin02.png"), 0u);
  EXPECT_EQ(w.files.count("energy_sum_bin02.png"), 0u);
  EXPECT_EQ(w.files.count("transverse_profile_y_bin01.png"), 0u);
  EXPECT_EQ(w.files.count("longitudinal_profile_bin01.png"), 1u);
  EXPECT_EQ(w.report.files.size(), 16u - 4u);
  EXPECT_THAT(w.files.at("index.md"), HasSubstr("Not plotted:"));
}

TEST(ModelPlotsTest, HostileNamesNeverReachFileNames) {
  v1::ModelVersion model;
  model.set_name("ele\n| [x](javascript:1)");
  model.set_version(1);
  Binned(&model, "../../etc/passwd", "10-20 GeV", 5, false);
  Binned(&model, "profile_z/../../x", "10-20 GeV", 5, false);
  Binned(&model, "profile_z", "../../../tmp/evil|<b>[x](y)\n", 5, false);
  Binned(&model, "feature/hits", std::string("\0\xff/..", 5), 5, false);
  const Written w = Plot(model);
  ASSERT_TRUE(w.status.ok()) << w.status;
  for (const auto& [name, bytes] : w.files) {
    EXPECT_EQ(name.find('/'), std::string::npos) << name;
    EXPECT_EQ(name.find(".."), std::string::npos) << name;
    EXPECT_NE(name[0], '.') << name;
  }
  EXPECT_THAT(Names(w),
              ElementsAre("longitudinal_profile_bin01.png", "hit_count_bin02.png", "index.md"));
  const std::string& index = w.files.at("index.md");
  EXPECT_THAT(index, Not(HasSubstr("<b>")));
  EXPECT_THAT(index, Not(HasSubstr("](y)")));
  EXPECT_THAT(index, Not(HasSubstr("[x]")));
  EXPECT_THAT(index, HasSubstr("# Validation plots of ele?? ?x??javascript:1?:1\n"));
  EXPECT_THAT(index, HasSubstr("| ../../../tmp/evil??b??x??y?? |"));
}

TEST(ModelPlotsTest, BoundsOnHistogramsAndEnergyBins) {
  v1::ModelVersion model;
  model.set_name("many");
  model.set_version(1);
  for (int b = 0; b < 40; ++b) {
    Binned(&model, "profile_z", std::to_string(10 * b) + "-" + std::to_string(10 * b + 10) + " GeV",
           3, false);
  }
  ModelPlotsOptions options;
  options.max_energy_bins = 4;
  Written w = Plot(model, options);
  ASSERT_TRUE(w.status.ok()) << w.status;
  EXPECT_EQ(w.report.files.size(), 5u);
  EXPECT_EQ(w.report.warnings.size(), 36u);
  EXPECT_THAT(w.report.warnings[0], HasSubstr("more than 4 energy bins; skipped"));

  for (int b = 40; b < 300; ++b) {
    Binned(&model, "profile_z", std::to_string(10 * b) + "-" + std::to_string(10 * b + 10) + " GeV",
           3, false);
  }
  w = Plot(model, ModelPlotsOptions());
  ASSERT_TRUE(w.status.ok()) << w.status;
  EXPECT_EQ(w.report.files.size(), 33u);  // 32 energy bins and the index
  ASSERT_EQ(w.report.warnings.size(), 101u);
  EXPECT_EQ(w.report.warnings.back(), "168 more warnings not listed");

  options.max_histograms = 2;
  w = Plot(model, options);
  EXPECT_EQ(w.report.files.size(), 3u);
  EXPECT_THAT(w.report.warnings[0], HasSubstr("only the first 2 of 300 histograms"));

  v1::ModelVersion big;
  big.set_name("big");
  v1::Histogram* h = Binned(&big, "profile_z", "10-20 GeV", 5000, false);
  h->set_name("profile_z");
  w = Plot(big);
  EXPECT_EQ(w.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(w.report.warnings[0], HasSubstr("more than 4096 entries"));
}

TEST(ModelPlotsTest, WithoutEdgesOrXTheBinsAreIndices) {
  v1::ModelVersion model;
  model.set_name("plain");
  model.set_version(1);
  v1::Histogram* h = model.add_histograms();
  h->set_name("profile_z");
  for (double v : {1.0, 3.0, 2.0}) h->add_reference(v);
  for (double v : {1.5, 3.0, 1.0}) h->add_generated(v);
  const Written w = Plot(model);
  ASSERT_TRUE(w.status.ok()) << w.status;
  EXPECT_THAT(w.report.warnings, IsEmpty());
  EXPECT_THAT(Names(w), ElementsAre("longitudinal_profile_all.png", "index.md"));
  EXPECT_THAT(w.files.at("index.md"), HasSubstr("| longitudinal profile | - |"));
}

// A curve as a job stores it: `points` checkpoints with every metric of the figure and floors.
void AddCurve(v1::ModelVersion* model, int points) {
  for (int e = 1; e <= points; ++e) {
    v1::ValidationPoint* p = model->add_validation_curve();
    p->set_epoch(e);
    p->set_step(50 * e);
    auto& m = *p->mutable_metrics();
    for (const char* name :
         {"mre_sampling_fraction", "eprof_longitudinal", "eprof_transverse", "pos", "fom",
          "shower_max_relative_error", "centroid_depth_relative_error"}) {
      m[name] = 0.3 / e + 0.01;
      m[std::string(name) + "_null"] = 0.005;
    }
    m["separation_power"] = 0.2;  // not drawn
  }
}

TEST(ModelPlotsTest, TheValidationCurveComesFirstAndIsListed) {
  v1::ModelVersion model = Model(true, true);
  AddCurve(&model, 6);
  const Written w = Plot(model);
  ASSERT_TRUE(w.status.ok()) << w.status;
  EXPECT_THAT(w.report.warnings, IsEmpty());
  ASSERT_GE(w.report.files.size(), 2u);
  EXPECT_EQ(w.report.files[0].file_name, "validation_curve.png");
  EXPECT_EQ(w.report.files[0].kind, "validation metrics against training step");
  EXPECT_EQ(w.files.at("validation_curve.png").substr(1, 3), "PNG");
  EXPECT_THAT(w.files.at("index.md"),
              HasSubstr("| [validation_curve.png](validation_curve.png) | validation metrics "
                        "against training step | - |"));
  EXPECT_EQ(Plot(model).files, w.files);  // deterministic

  // Only the curve (no histograms): still a figure and an index; SVG too.
  v1::ModelVersion curve_only;
  curve_only.set_name("ele");
  curve_only.set_version(4);
  AddCurve(&curve_only, 1);
  ModelPlotsOptions svg;
  svg.render.format = ImageFormat::kSvg;
  const Written only = Plot(curve_only, svg);
  ASSERT_TRUE(only.status.ok()) << only.status;
  EXPECT_THAT(Names(only), ElementsAre("validation_curve.svg", "index.md"));
  EXPECT_THAT(only.files.at("validation_curve.svg"), HasSubstr("<svg"));
}

TEST(ModelPlotsTest, HostileCurveValuesAreSkippedPerSeriesWithAWarning) {
  v1::ModelVersion model;
  model.set_name("ele");
  model.set_version(5);
  AddCurve(&model, 5);
  const std::string clean = Plot(model).files.at("validation_curve.png");
  // NaN, infinite, zero and negative values, a negative step, a hostile metric name, points out
  // of order: the figure is drawn from what is usable.
  auto& m0 = *model.mutable_validation_curve(0)->mutable_metrics();
  m0["fom"] = std::nan("");
  m0["pos"] = INFINITY;
  m0["eprof_transverse"] = 0;
  m0["mre_sampling_fraction_null"] = -1;
  m0["../../\x1b[31m"] = 1;
  model.mutable_validation_curve(1)->set_step(-7);
  model.mutable_validation_curve(2)->set_step(1000000);
  const Written w = Plot(model);
  ASSERT_TRUE(w.status.ok()) << w.status;
  EXPECT_THAT(Names(w), ElementsAre("validation_curve.png", "index.md"));
  EXPECT_NE(w.files.at("validation_curve.png"), clean);
  EXPECT_THAT(w.report.warnings,
              ElementsAre("validation curve: 1 points with a negative step; skipped",
                          "validation curve: 1 values of mre_sampling_fraction (or its floor) "
                          "NaN, infinite, zero or negative; skipped",
                          "validation curve: 1 values of eprof_transverse (or its floor) NaN, "
                          "infinite, zero or negative; skipped",
                          "validation curve: 1 values of pos (or its floor) NaN, infinite, zero "
                          "or negative; skipped",
                          "validation curve: 1 values of fom (or its floor) NaN, infinite, zero "
                          "or negative; skipped"));

  // A curve whose every value is unusable, or with none of the metrics: no figure, and with
  // nothing else stored, nothing to plot.
  v1::ModelVersion unusable;
  unusable.set_name("ele");
  unusable.set_version(6);
  (*unusable.add_validation_curve()->mutable_metrics())["fom"] = std::nan("");
  (*unusable.add_validation_curve()->mutable_metrics())["other"] = 0.5;
  const Written none = Plot(unusable);
  EXPECT_EQ(none.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.files, IsEmpty());
}

TEST(ModelPlotsTest, AHugeCurveIsCutToTheFirstThousandPoints) {
  v1::ModelVersion model;
  model.set_name("ele");
  model.set_version(7);
  AddCurve(&model, static_cast<int>(kMaxCurvePoints) + 500);
  const Written w = Plot(model);
  ASSERT_TRUE(w.status.ok()) << w.status;
  EXPECT_THAT(Names(w), ElementsAre("validation_curve.png", "index.md"));
  EXPECT_THAT(w.report.warnings,
              ElementsAre("validation curve: only the first 1000 of 1500 points were plotted"));
  // Older versions with only "eprof": drawn in place of the two profile metrics.
  v1::ModelVersion older;
  older.set_name("ele");
  older.set_version(8);
  (*older.add_validation_curve()->mutable_metrics())["eprof"] = 0.2;
  const Written old = Plot(older);
  ASSERT_TRUE(old.status.ok()) << old.status;
  EXPECT_THAT(Names(old), ElementsAre("validation_curve.png", "index.md"));
}

TEST(ModelPlotsTest, NothingToPlotIsFailedPrecondition) {
  v1::ModelVersion model;
  model.set_name("empty");
  model.set_version(2);
  const Written w = Plot(model);
  EXPECT_EQ(w.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(w.status.message(),
              HasSubstr("empty:2 has no validation histograms that can be plotted"));
  EXPECT_THAT(w.files, IsEmpty());
}

TEST(ModelPlotsTest, ASinkErrorStopsTheRun) {
  ModelPlotsReport report;
  int calls = 0;
  const absl::Status status = WriteModelPlots(
      Model(true, true), ModelPlotsOptions(),
      [&](const std::string&, const std::string&) {
        ++calls;
        return absl::DataLossError("disk full");
      },
      &report);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace gantry::plots
