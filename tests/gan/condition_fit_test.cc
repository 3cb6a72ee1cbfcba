// The fake conditions and the ecal-sum target fitted to the training data (gan::ConditionFit).
#include "workers/gan/condition_fit.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"
#include "workers/baseline/baseline_sampler.h"
#include "workers/gan/preprocessing.h"

namespace gantry::gan {
namespace {

double PolyVal(const std::vector<double>& c, double x) {
  double r = 0;
  for (double v : c) r = r * x + v;
  return r;
}

std::vector<int64_t> AllRows(const showers::ShowerSet& s) {
  std::vector<int64_t> rows(static_cast<size_t>(s.events()));
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

showers::ShowerSet Toy(int64_t events, double emin, double emax, uint64_t seed = 1) {
  showers::ToyMcConfig mc;
  mc.events = events;
  mc.energy_min_gev = emin;
  mc.energy_max_gev = emax;
  mc.seed = seed;
  return *showers::SimulateToyMc(mc);
}

// The sample of all of `data`, written to a shower file and read back (the file variant of
// SampleConditions).
absl::StatusOr<ConditionSample> SampleFromFile(const ModelConfig& c, const showers::ShowerSet& data,
                                               const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name;
  if (absl::Status written = showers::WriteShowerFile(path, data); !written.ok()) return written;
  auto reader = showers::ShowerFileReader::Open(path);
  if (!reader.ok()) return reader.status();
  return SampleConditions(c, **reader, AllRows(data));
}

TEST(ConditionFitTest, PolynomialRecoversItsCoefficients) {
  const std::vector<double> want = {0.0018, -0.023, 0.11, -0.28, 2.21};
  std::vector<double> x, y;
  for (int i = 0; i <= 200; ++i) {
    x.push_back(0.1 + 4.9 * i / 200.0);
    y.push_back(PolyVal(want, x.back()));
  }
  const std::vector<double> got = FitPolynomial(x, y, 4);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

TEST(ConditionFitTest, SingleEnergyFitsAConstant) {
  ModelConfig c = *PresetConfig("tiny");
  ConditionSample s;
  s.energy_gev = {100, 100, 100};
  s.sample_energy_gev = {100, 100, 100};
  s.sample_ecal = {190, 200, 210};  // model units: 100 x GeV
  ASSERT_TRUE(FitConditionsToData(s, &c).ok());
  ASSERT_EQ(c.ecal_fit.size(), 1u);
  EXPECT_NEAR(c.ecal_fit[0], 2.0, 1e-12);  // ratio = ecal / (E/100) / ecal_fit_scale
  EXPECT_EQ(c.fake_energy_min_gev, 100);
  EXPECT_EQ(c.fake_energy_max_gev, 100);
  EXPECT_FALSE(c.fit_conditions_to_data);
  EXPECT_TRUE(ValidateModelConfig(c).ok());
}

TEST(ConditionFitTest, RefusesDataWithoutEnergies) {
  ModelConfig c = *PresetConfig("tiny");
  ConditionSample s;
  s.energy_gev = {0, -1, std::nan("")};
  s.sample_energy_gev = {0};
  s.sample_ecal = {1};
  const absl::StatusOr<std::string> fitted = FitConditionsToData(s, &c);
  EXPECT_EQ(fitted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(c.fit_conditions_to_data);  // untouched
}

TEST(ConditionFitTest, NotAskedLeavesTheReferenceValues) {
  ModelConfig c = *PresetConfig("3dgan-25");
  c.fit_conditions_to_data = false;
  const ModelConfig before = c;
  ConditionSample s;
  s.energy_gev = {50};
  s.sample_energy_gev = {50};
  s.sample_ecal = {1};
  ASSERT_TRUE(FitConditionsToData(s, &c).ok());
  EXPECT_EQ(SerializeModelConfig(c), SerializeModelConfig(before));
}

// On the toy Monte Carlo at 10-200 GeV: fakes are drawn where the data is, and the ecal target
// follows the toy's own sampling fraction (not the reference's Geant4 fit) in every energy bin.
TEST(ConditionFitTest, ToyMonteCarloTargetMatchesItsSamplingFraction) {
  const showers::ShowerSet data = Toy(600, 10, 200, 3);
  ModelConfig c = *PresetConfig("tiny");
  const absl::StatusOr<std::string> fitted =
      FitConditionsToData(*SampleConditions(c, data, AllRows(data)), &c);
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  EXPECT_NE(fitted->find("fake energies"), std::string::npos);
  EXPECT_GE(c.fake_energy_min_gev, 10);
  EXPECT_LE(c.fake_energy_max_gev, 200);
  EXPECT_LT(c.fake_energy_min_gev, 15);
  EXPECT_GT(c.fake_energy_max_gev, 195);
  // Mean preprocessed ecal per 38 GeV bin against the fitted target at the bin's mean energy.
  const TrainingTensors t = *PreprocessShowers(c, data);
  std::map<int, std::pair<double, double>> sum;  // bin -> (ecal, E/100)
  std::map<int, int> n;
  for (int64_t i = 0; i < data.events(); ++i) {
    const int bin = static_cast<int>((data.energy_gev[i] - 10) / 38.0);
    sum[bin].first += t.ecal[i].item<double>();
    sum[bin].second += t.energy100[i].item<double>();
    ++n[bin];
  }
  for (const auto& [bin, s] : sum) {
    if (n[bin] < 50) continue;
    const double x = s.second / n[bin];
    const double target = PolyVal(c.ecal_fit, x) * x * c.ecal_fit_scale;
    EXPECT_NEAR(target / (s.first / n[bin]), 1.0, 0.02) << "bin " << bin;
  }
}

TEST(ConditionFitTest, FileSampleEqualsMemorySample) {
  const showers::ShowerSet data = Toy(300, 20, 80);
  const std::string path = ::testing::TempDir() + "/condition_fit.h5";
  ASSERT_TRUE(showers::WriteShowerFile(path, data).ok());
  auto reader = showers::ShowerFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ModelConfig a = *PresetConfig("tiny"), b = a;
  std::vector<int64_t> rows = AllRows(data);
  rows.erase(rows.begin(), rows.begin() + 7);  // a hold-out split takes some
  auto from_file = SampleConditions(a, **reader, rows);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_TRUE(FitConditionsToData(*from_file, &a).ok());
  ASSERT_TRUE(FitConditionsToData(*SampleConditions(b, data, rows), &b).ok());
  EXPECT_EQ(SerializeModelConfig(a), SerializeModelConfig(b));
  EXPECT_EQ(SampleConditions(a, **reader, {-1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SampleConditions(b, data, {300}).status().code(), absl::StatusCode::kInvalidArgument);
  // Showers of another grid are refused, from memory and from a file, before any cell is read.
  const absl::Status other_grid = SampleConditions(*PresetConfig("3dgan-51"), data, rows).status();
  EXPECT_EQ(other_grid.code(), absl::StatusCode::kInvalidArgument) << other_grid;
  EXPECT_EQ(SampleConditions(*PresetConfig("3dgan-51"), **reader, rows).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// generator_template: the sample carries the per-cell least-squares fit cell / e = a + b ln e
// (e = E/100, preprocessed cells), the same from a file as from memory, and nothing without a
// template; one beam energy gives b = 0 and a = the mean.
TEST(ConditionFitTest, ShowerTemplateIsTheLogEnergyFitOfThePreprocessedShowers) {
  const showers::ShowerSet data = Toy(120, 20, 180, 4);
  ModelConfig c = *PresetConfig("tiny");
  EXPECT_TRUE(SampleConditions(c, data, AllRows(data))->shower_template.empty());
  c.generator_template = true;
  const ConditionSample s = *SampleConditions(c, data, AllRows(data));
  const int64_t n = data.cells_per_event();
  ASSERT_EQ(static_cast<int64_t>(s.shower_template.size()), 2 * n);
  // By hand, in float64 tensors.
  const TrainingTensors t = *PreprocessShowers(c, data);
  const at::Tensor e = t.energy100.to(at::kDouble);
  const at::Tensor y = t.images.reshape({data.events(), n}).to(at::kDouble) / e;
  const at::Tensor x = at::log(e) - at::log(e).mean();
  const at::Tensor b = (x * (y - y.mean(0))).sum(0) / (x * x).sum();
  const at::Tensor a = y.mean(0) - b * at::log(e).mean();
  const double peak = a.abs().max().item<double>();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(s.shower_template[i], a[i].item<double>(), 1e-6 * peak) << i;
    ASSERT_NEAR(s.shower_template[n + i], b[i].item<double>(), 1e-6 * peak) << i;
  }
  // The toy's showers are centred and deepen with energy: the mean's largest cell is in the
  // central column, and the deepest layers gain with ln e (b > 0) while the first lose (b < 0).
  const at::Tensor mean = y.mean(0).view({c.grid[0], c.grid[1], c.grid[2]});
  const int64_t argmax = mean.argmax().item<int64_t>();
  EXPECT_EQ(argmax / (c.grid[1] * c.grid[2]), c.grid[0] / 2);
  EXPECT_EQ(argmax / c.grid[2] % c.grid[1], c.grid[1] / 2);
  const at::Tensor slope = b.view({c.grid[0], c.grid[1], c.grid[2]})[c.grid[0] / 2][c.grid[1] / 2];
  EXPECT_LT(slope[1].item<double>(), 0);
  EXPECT_GT(slope[c.grid[2] - 3].item<double>(), 0);
  auto from_file = SampleFromFile(c, data, "template.h5");
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->shower_template, s.shower_template);
  // One beam energy.
  const showers::ShowerSet beam = Toy(120, 50, 50, 4);
  const ConditionSample one = *SampleConditions(c, beam, AllRows(beam));
  ASSERT_EQ(static_cast<int64_t>(one.shower_template.size()), 2 * n);
  const TrainingTensors tb = *PreprocessShowers(c, beam);
  const at::Tensor beam_mean =
      (tb.images.reshape({beam.events(), n}).to(at::kDouble) / tb.energy100.to(at::kDouble))
          .mean(0);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(one.shower_template[i], beam_mean[i].item<double>(), 1e-6 * peak) << i;
    ASSERT_EQ(one.shower_template[n + i], 0.0) << i;
  }
}

// profile_loss_weight > 0: FitConditionsToData also fits profile_fit, per x, y and z slice the
// least-squares line (slice sum / e) = a + b ln e. Least squares is linear in the data, so each
// slice's line is the sum of the shower template's per-cell lines over the slice's cells; the
// same from a file; one beam energy gives b = 0; without the weight the config has no fit.
TEST(ConditionFitTest, ProfileFitIsTheTemplateSummedOverEachSlice) {
  const showers::ShowerSet data = Toy(120, 20, 180, 4);
  ModelConfig c = *PresetConfig("tiny");
  c.generator_template = true;
  ModelConfig without = c;
  c.profile_loss_weight = 0.5;
  const ConditionSample s = *SampleConditions(c, data, AllRows(data));
  ASSERT_EQ(static_cast<int64_t>(s.sample_profiles.size()), 75 * data.events());
  ASSERT_TRUE(FitConditionsToData(s, &c).ok());
  ASSERT_TRUE(FitConditionsToData(s, &without).ok());
  EXPECT_TRUE(without.profile_fit.empty());
  ASSERT_EQ(c.profile_fit.size(), 150u);
  const at::Tensor t = at::tensor(s.shower_template, at::kDouble).view({2, 25, 25, 25});
  const at::Tensor summed =
      at::cat({t.sum({2, 3}), t.sum({1, 3}), t.sum({1, 2})}, 1);  // (2, 75): a, then b
  const double peak = summed.abs().max().item<double>();
  for (int64_t i = 0; i < 75; ++i) {
    EXPECT_NEAR(c.profile_fit[i], summed[0][i].item<double>(), 1e-9 * peak) << i;
    EXPECT_NEAR(c.profile_fit[75 + i], summed[1][i].item<double>(), 1e-9 * peak) << i;
  }
  // Every axis's slices add up to the same total: the mean ecal sum per e.
  const at::Tensor a = at::tensor(c.profile_fit, at::kDouble).slice(0, 0, 75);
  EXPECT_NEAR(a.slice(0, 0, 25).sum().item<double>(), a.slice(0, 50).sum().item<double>(),
              1e-9 * peak);
  EXPECT_GT(a.slice(0, 50).sum().item<double>(), 0);
  // The fitted config round-trips and refits identically from a file.
  EXPECT_EQ(ParseModelConfig(SerializeModelConfig(c))->profile_fit, c.profile_fit);
  ModelConfig f = *PresetConfig("tiny");
  f.generator_template = true;
  f.profile_loss_weight = 0.5;
  auto from_file = SampleFromFile(f, data, "profile.h5");
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_TRUE(FitConditionsToData(*from_file, &f).ok());
  EXPECT_EQ(f.profile_fit, c.profile_fit);
  // One beam energy: b = 0.
  const showers::ShowerSet beam = Toy(60, 50, 50, 4);
  ModelConfig one = *PresetConfig("tiny");
  one.profile_loss_weight = 0.5;
  ASSERT_TRUE(FitConditionsToData(*SampleConditions(one, beam, AllRows(beam)), &one).ok());
  ASSERT_EQ(one.profile_fit.size(), 150u);
  for (int64_t i = 0; i < 75; ++i) EXPECT_EQ(one.profile_fit[75 + i], 0.0) << i;
  EXPECT_GT(std::accumulate(one.profile_fit.begin(), one.profile_fit.begin() + 25, 0.0), 0);
}

// template_modes: after a and b (unchanged by the modes) come the leading principal components of
// the events' deviations from a + b ln e, each times its standard deviation: by hand, the
// eigenvalues of the deviations' Gram matrix in float64 are events x |M_k|^2, largest first; the
// modes are orthogonal, each an eigenvector of the covariance, their largest entry positive, the
// same from a file as from memory. Three events leave the third mode 0 (two independent
// deviations only).
TEST(ConditionFitTest, ShowerTemplateModesAreTheLeadingPrincipalComponents) {
  const showers::ShowerSet data = Toy(120, 20, 180, 4);
  ModelConfig c = *PresetConfig("tiny");
  c.generator_template = true;
  const std::vector<double> line = SampleConditions(c, data, AllRows(data))->shower_template;
  c.template_modes = 3;
  const ConditionSample s = *SampleConditions(c, data, AllRows(data));
  const int64_t n = data.cells_per_event();
  ASSERT_EQ(static_cast<int64_t>(s.shower_template.size()), 5 * n);
  EXPECT_TRUE(std::equal(line.begin(), line.end(), s.shower_template.begin()));

  const at::Tensor all = at::tensor(s.shower_template, at::kDouble).view({5, n});
  const TrainingTensors t = *PreprocessShowers(c, data);
  const at::Tensor e = t.energy100.to(at::kDouble);
  const at::Tensor deviations =
      t.images.reshape({data.events(), n}).to(at::kDouble) / e - all[0] - at::log(e) * all[1];
  const at::Tensor eigenvalues =
      std::get<0>(at::linalg_eigh(at::matmul(deviations, deviations.t()))).flip(0);
  for (int64_t k = 0; k < 3; ++k) {
    const at::Tensor mode = all[2 + k];
    const double norm2 = mode.dot(mode).item<double>();
    EXPECT_NEAR(norm2 * data.events(), eigenvalues[k].item<double>(),
                1e-4 * eigenvalues[0].item<double>())
        << k;
    // An eigenvector of the covariance with eigenvalue |M_k|^2.
    const at::Tensor image =
        at::matmul(deviations.t(), at::matmul(deviations, mode)) / data.events();
    EXPECT_LT((image - norm2 * mode).norm().item<double>(),
              1e-3 * norm2 * mode.norm().item<double>())
        << k;
    EXPECT_GT(mode[mode.abs().argmax()].item<double>(), 0) << k;
    for (int64_t j = 0; j < k; ++j) {
      EXPECT_LT(std::fabs(mode.dot(all[2 + j]).item<double>()),
                1e-4 * std::sqrt(norm2 * all[2 + j].dot(all[2 + j]).item<double>()))
          << j << " " << k;
    }
  }
  EXPECT_GT(all[2].norm().item<double>(), all[3].norm().item<double>());

  auto from_file = SampleFromFile(c, data, "modes.h5");
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->shower_template, s.shower_template);

  const ConditionSample three = *SampleConditions(c, data, {0, 1, 2});
  ASSERT_EQ(static_cast<int64_t>(three.shower_template.size()), 5 * n);
  const at::Tensor few = at::tensor(three.shower_template, at::kDouble).view({5, n});
  EXPECT_GT(few[3].norm().item<double>(), 0);
  EXPECT_EQ(few[4].norm().item<double>(), 0);
}

// The no-network baseline (workers/baseline, torch-free) fits the same template and modes in GeV
// per GeV of primary energy: on the 25^3 grid, 10^4 times its values are the shower template's.
TEST(ConditionFitTest, BaselineSamplerFitsTheSameTemplateAndModes) {
  const showers::ShowerSet data = Toy(120, 20, 180, 4);
  ModelConfig c = *PresetConfig("tiny");
  c.generator_template = true;
  c.template_modes = 2;
  const ConditionSample s = *SampleConditions(c, data, AllRows(data));
  baseline::BaselineFitOptions options;
  options.kind = baseline::BaselineKind::kTemplate;
  const baseline::BaselineSampler sampler = *baseline::BaselineSampler::Fit(data, {}, options);
  const baseline::BaselineParameters& p = sampler.parameters();
  const int64_t n = data.cells_per_event();
  double peak_a = 0;
  for (int64_t i = 0; i < n; ++i) peak_a = std::max(peak_a, std::fabs(s.shower_template[i]));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(1e4 * p.a[i], s.shower_template[i], 1e-5 * peak_a) << i;
    ASSERT_NEAR(1e4 * p.b[i], s.shower_template[n + i], 1e-5 * peak_a) << i;
  }
  for (int k = 0; k < 2; ++k) {
    const double* mode = s.shower_template.data() + (2 + k) * n;
    double peak = 0;
    for (int64_t i = 0; i < n; ++i) peak = std::max(peak, std::fabs(mode[i]));
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(1e4 * p.sigma[k] * p.modes[k][i], mode[i], 1e-3 * peak) << k << " " << i;
    }
  }
}

// generator_spots: the fit finds the spot energy for which the template's showers have the data's
// mean number of non-zero cells, which is the spots baseline's on the same events (fitted there
// in GeV per GeV on other draws of the modes and energies: within 10%).
TEST(ConditionFitTest, SpotEnergyIsTheSpotsBaselines) {
  const showers::ShowerSet data = Toy(300, 20, 180, 4);
  ModelConfig c = *PresetConfig("tiny-template");
  c.generator_spots = true;
  ASSERT_TRUE(ValidateModelConfig(c).ok());
  const ConditionSample s = *SampleConditions(c, data, AllRows(data));
  ASSERT_EQ(s.sample_nonzero_cells.size(), s.sample_energy_gev.size());
  const absl::StatusOr<std::string> fit = FitConditionsToData(s, &c);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NE(fit->find("spots of"), std::string::npos) << *fit;
  baseline::BaselineFitOptions options;
  options.kind = baseline::BaselineKind::kSpots;
  const baseline::BaselineSampler sampler = *baseline::BaselineSampler::Fit(data, {}, options);
  const double baseline_spot = sampler.parameters().spot_gev;
  EXPECT_GT(c.generator_spot_gev, 0);
  EXPECT_NEAR(c.generator_spot_gev, baseline_spot, 0.1 * baseline_spot);
  // The fitted config round-trips and trains without a further fit.
  const absl::StatusOr<ModelConfig> back = ParseModelConfig(SerializeModelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->generator_spots);
  EXPECT_EQ(back->generator_spot_gev, c.generator_spot_gev);
  EXPECT_FALSE(back->fit_conditions_to_data);
}

// Spots need the template and linear cells; a spot energy needs spots, and a config that will not
// be fitted needs one; configs written before spots read as without.
TEST(ConditionFitTest, SpotConfigsOutOfBoundsAreRefused) {
  auto refused = [](ModelConfig c, const std::string& key) {
    const absl::Status s = ValidateModelConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_NE(s.message().find(key), std::string::npos) << s;
  };
  ModelConfig c = *PresetConfig("tiny");
  c.generator_spots = true;
  refused(c, "generator_spots needs generator_template=1");
  ModelConfig wide = *PresetConfig("3dgan-51");
  wide.generator_template = true;
  wide.generator_spots = true;
  refused(wide, "cell_power 1");
  ModelConfig t = *PresetConfig("tiny-template");
  t.generator_spot_gev = 0.01;
  refused(t, "generator_spot_gev needs generator_spots=1");
  t.generator_spots = true;
  for (double bad : {-0.01, 2.0, std::nan("")}) {
    t.generator_spot_gev = bad;
    refused(t, "generator_spot_gev must be in [0, 1]");
  }
  t.generator_spot_gev = 0;
  t.fit_conditions_to_data = false;
  refused(t, "set fit_conditions_to_data=1");
  std::string old = SerializeModelConfig(*PresetConfig("tiny-template"));
  for (const std::string line : {"generator_spots=0\n", "generator_spot_gev=0\n"}) {
    const size_t at = old.find(line);
    ASSERT_NE(at, std::string::npos) << line;
    old.erase(at, line.size());
  }
  const absl::StatusOr<ModelConfig> parsed = ParseModelConfig(old);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->generator_spots);
  const absl::StatusOr<ModelConfig> set =
      OverrideModelConfig(*PresetConfig("tiny-template"), "generator_spots=1");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->generator_spots);
}

TEST(ConditionFitTest, ConfigKeepsTheFlagAndOldConfigsParseWithoutIt) {
  ModelConfig c = *PresetConfig("tiny");
  EXPECT_TRUE(c.fit_conditions_to_data);
  const std::string text = SerializeModelConfig(c);
  EXPECT_TRUE(ParseModelConfig(text)->fit_conditions_to_data);
  std::string old = text;
  const size_t at = old.find("fit_conditions_to_data=1\n");
  ASSERT_NE(at, std::string::npos);
  old.erase(at, std::string("fit_conditions_to_data=1\n").size());
  const absl::StatusOr<ModelConfig> parsed = ParseModelConfig(old);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->fit_conditions_to_data);
  std::string bad = text;
  bad.replace(at, std::string("fit_conditions_to_data=1").size(), "fit_conditions_to_data=7");
  EXPECT_EQ(ParseModelConfig(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConditionFitTest, OverridesReplaceNamedFields) {
  const ModelConfig c = *PresetConfig("tiny");
  const absl::StatusOr<ModelConfig> o =
      OverrideModelConfig(c, "latent=64; loss_weights=2,0.1,1;fit_conditions_to_data=0");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->latent, 64);
  EXPECT_EQ(o->loss_weights, (std::vector<double>{2, 0.1, 1}));
  EXPECT_FALSE(o->fit_conditions_to_data);
  EXPECT_EQ(OverrideModelConfig(c, "nope=1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OverrideModelConfig(c, "preset=3dgan-25").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OverrideModelConfig(c, "latent=0").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::gan
