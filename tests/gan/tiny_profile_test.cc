// The tiny preset learns the longitudinal shower profile of the toy Monte Carlo within a bounded
// number of steps: a visible longitudinal profile, not noise, not empty.
//
// A test of learning, not of one trajectory: GAN training is chaotic, and the rounding of oneDNN's
// AVX2 and AVX-512 kernels (and of OpenBLAS's) differs, so a seed's trajectory on one CPU says
// nothing about the same seed on another. The test trains several seeds and asserts what training
// achieves on a majority of them and on their median, with bounds calibrated over more seeds on
// both kinds of kernels and two CPU makers (docs/studies/2026-11-28-tiny-profile-calibration.md has
// the calibration table). Bit-reproducibility for a seed and thread count is a separate test that
// compares a run with itself (gan.TrainerTest.DeterministicForSeedAndThreads).
//
// Calibration runs (other seeds, r every 10 steps; nothing asserted):
//   GANTRY_TINY_SEEDS=1,2,3,4,5,6 GANTRY_TINY_CURVE=1 build/tests/gan/gan_tiny_profile_test
// and the same with AVX2 kernels on an AVX-512 machine: DNNL_MAX_CPU_ISA=AVX2 (oneDNN) and
// OPENBLAS_CORETYPE=Haswell (OpenBLAS); ATen's own kernels are AVX2 on both (LibTorch 1.13).
// ~75 s a seed on one core.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "tests/gan/test_data.h"
#include "workers/gan/shower_generator.h"
#include "workers/gan/trainer.h"

namespace gantry::gan {
namespace {

double Pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n;
  const double mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

std::vector<double> GeneratedProfile(Trainer& trainer, const showers::ShowerSet& mc) {
  ShowerGenerator generator(trainer.config(), trainer.state().generator);
  GenerationRequest request;
  request.energy_gev.assign(mc.energy_gev.begin(), mc.energy_gev.begin() + 64);
  request.seed = 5;
  auto showers = generator.Generate(request);
  EXPECT_TRUE(showers.ok()) << showers.status();
  trainer.mutable_state().generator->train();
  return showers.ok() ? testing::MeanLongitudinalProfile(*showers) : std::vector<double>(25, 0.0);
}

std::vector<int> IntList(const char* text, std::vector<int> fallback) {
  if (text == nullptr || *text == '\0') return fallback;
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::atoi(item.c_str()));
  return out;
}

struct Outcome {
  int seed = 0;
  double r_untrained = 0;
  // Pearson r of the mean z profile of 64 generated showers and the MC's, at steps 40, 50 and 60
  // (of 60; more steps with GANTRY_TINY_STEPS), and their median: a GAN's generator oscillates from
  // step to step, and one evaluation catches a dip as often as not.
  std::vector<double> r_at;
  double r = 0;
  // Of the evaluation whose r is that median (a dip at the last step says as little about the
  // peak and the deposit as about r).
  int step = 0;
  size_t peak = 0;
  double total = 0;  // mean deposited energy, GeV
};

// Trains tiny for `steps` steps with `seed` (one thread, batch 8) and scores it.
Outcome TrainTiny(const showers::ShowerSet& mc, const std::vector<double>& mc_profile, int seed,
                  int steps, bool curve) {
  TrainerOptions options;
  options.batch_size = 8;
  options.seed = static_cast<uint64_t>(seed);
  options.threads = 1;  // steadier than 2 on a shared 2-core machine
  Outcome out;
  out.seed = seed;
  auto trainer = Trainer::Create(*PresetConfig("tiny"), mc, options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return out;
  out.r_untrained = Pearson(GeneratedProfile(**trainer, mc), mc_profile);
  std::string trajectory;
  struct Scored {
    double r;
    int step;
    std::vector<double> profile;
  };
  std::vector<Scored> scored_at;
  for (int i = 1; i <= steps; ++i) {
    auto step = (*trainer)->Step();
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) return out;
    const bool scored = i == steps || i == steps - 10 || i == steps - 20;
    if (scored || (curve && i % 10 == 0)) {
      std::vector<double> profile = GeneratedProfile(**trainer, mc);
      const double r = Pearson(profile, mc_profile);
      if (scored) {
        out.r_at.push_back(r);
        scored_at.push_back(Scored{r, i, std::move(profile)});
      }
      trajectory += " " + std::to_string(r).substr(0, 5);
    }
  }
  std::sort(scored_at.begin(), scored_at.end(),
            [](const Scored& a, const Scored& b) { return a.r < b.r; });
  const Scored& median = scored_at[scored_at.size() / 2];
  out.r = median.r;
  out.step = median.step;
  out.total = std::accumulate(median.profile.begin(), median.profile.end(), 0.0);
  out.peak =
      std::max_element(median.profile.begin(), median.profile.end()) - median.profile.begin();
  std::cerr << "seed " << seed << ": untrained r " << out.r_untrained << "; r" << trajectory
            << (curve ? " (every 10 steps)" : " (3 last tens)") << ", median of the last three "
            << out.r << " (step " << out.step << "): peak layer " << out.peak << ", mean deposit "
            << out.total << " GeV\n";
  return out;
}

// What a seed must reach to count as learned (calibration below), and the median r over seeds.
bool Learned(const Outcome& o) { return o.r > 0.2 && o.peak > 0 && o.peak < 24; }
constexpr double kMedianR = 0.4;

// Whether the seeds trained so far decide the verdict (a majority of `total` seeds learned, and the
// median r over them above kMedianR) whatever the untrained seeds would give: the worst they could
// give still passes, or the best they could give still fails.
bool VerdictIsSettled(const std::vector<Outcome>& done, size_t total) {
  const size_t left = total - done.size();
  size_t learned = 0;
  std::vector<double> rs;
  for (const Outcome& o : done) {
    learned += Learned(o) ? 1 : 0;
    rs.push_back(o.r);
  }
  auto median_with = [&](double fill) {
    std::vector<double> all = rs;
    all.insert(all.end(), left, fill);
    std::sort(all.begin(), all.end());
    return all[all.size() / 2];
  };
  const bool passes_anyway = 2 * learned > total && median_with(-1.0) > kMedianR;
  const bool fails_anyway = 2 * (learned + left) <= total || median_with(1.0) <= kMedianR;
  return passes_anyway || fails_anyway;
}

TEST(TinyProfileTest, VerdictIsSettledOnlyWhenTheOtherSeedsCannotChangeIt) {
  auto outcome = [](double r, size_t peak) {
    Outcome o;
    o.r = r;
    o.peak = peak;
    return o;
  };
  const Outcome good = outcome(0.9, 13), weak = outcome(0.3, 13), flat = outcome(0.9, 0);
  EXPECT_FALSE(VerdictIsSettled({good}, 3));
  EXPECT_TRUE(VerdictIsSettled({good, good}, 3));        // passes whatever the third gives
  EXPECT_FALSE(VerdictIsSettled({good, weak}, 3));       // learned, but the median may be 0.3
  EXPECT_FALSE(VerdictIsSettled({good, flat}, 3));       // one learned: the third decides
  EXPECT_TRUE(VerdictIsSettled({flat, flat}, 3));        // fails whatever the third gives
  EXPECT_FALSE(VerdictIsSettled({good, good}, 5));
  EXPECT_TRUE(VerdictIsSettled({good, good, good}, 5));
  EXPECT_TRUE(VerdictIsSettled({good, flat, good}, 3));  // every seed trained
}

TEST(TinyProfileTest, MostSeedsLearnTheLongitudinalProfile) {
  const showers::ShowerSet mc = testing::FixedAngleShowers(512, 3);
  ASSERT_EQ(mc.events(), 512);
  showers::ShowerSet first64 = mc;
  first64.energy_gev.resize(64);
  first64.cells.resize(64 * mc.cells_per_event());
  const std::vector<double> mc_profile = testing::MeanLongitudinalProfile(first64);
  const double mc_total = std::accumulate(mc_profile.begin(), mc_profile.end(), 0.0);
  const size_t mc_peak =
      std::max_element(mc_profile.begin(), mc_profile.end()) - mc_profile.begin();
  std::cerr << "MC: peak layer " << mc_peak << ", mean deposit " << mc_total << " GeV\n";

  // The order changes the test's time, never its verdict (which is over all three seeds): seed 1
  // is last because on two of the three CPUs of the calibration it did not learn within 60 steps,
  // and when seeds 2 and 3 learn it is not trained (VerdictIsSettled).
  const std::vector<int> seeds = IntList(std::getenv("GANTRY_TINY_SEEDS"), {2, 3, 1});
  const std::vector<int> steps = IntList(std::getenv("GANTRY_TINY_STEPS"), {60});
  const bool curve = std::getenv("GANTRY_TINY_CURVE") != nullptr;
  const bool calibration = curve || steps.at(0) != 60;
  std::vector<Outcome> outcomes;
  for (int seed : seeds) {
    outcomes.push_back(TrainTiny(mc, mc_profile, seed, steps.at(0), curve));
    // The verdict below is over all the seeds; once the seeds trained so far decide it whatever
    // the others would give, they are not trained (a third of the test's time when the first two
    // learn). Calibration runs train every seed.
    if (!calibration && outcomes.size() < seeds.size() &&
        VerdictIsSettled(outcomes, seeds.size())) {
      std::cerr << "the verdict is settled after " << outcomes.size() << " of " << seeds.size()
                << " seeds; the others are not trained\n";
      break;
    }
  }
  if (calibration) return;  // calibration runs print; the bounds are for 60 steps

  // Calibration (docs/studies/2026-11-28-tiny-profile-calibration.md): r at step 60 was 0.56-0.91
  // over 7 runs (seeds 1-4 with AVX-512 kernels, 1-3 with AVX2), the median of the last three
  // 0.51-0.97 over the 5 runs that recorded it (0.57 over seeds 1-3 with AVX-512), and single
  // evaluations dipped to 0.26; untrained generators score -0.35 to 0.28. On an AMD EPYC (AVX2)
  // (2026-11-29) seeds 2 and 3 learned (median r 0.91, 0.88; peak layers 13, 16) and seed 1 did not
  // within 60 steps (r 0.64, 0.42, -0.02; its profile peaks at the front face). So no single seed
  // is asserted to learn: every seed trained must give showers of a sane total, and a majority of
  // the seeds must learn (median r above 0.2 and a peak inside the calorimeter), with the median
  // over seeds above 0.4.
  // Seeds left untrained (the verdict was settled without them) count as the worst outcome: not
  // learned, and below every r in the median.
  std::vector<double> rs(seeds.size() - outcomes.size(), -1.0);
  int learned = 0;
  for (const Outcome& o : outcomes) {
    rs.push_back(o.r);
    EXPECT_GT(o.total, 0.2 * mc_total) << "seed " << o.seed << ": showers are (nearly) empty";
    EXPECT_LT(o.total, 5.0 * mc_total) << "seed " << o.seed;
    if (Learned(o)) ++learned;
  }
  EXPECT_GT(2 * learned, static_cast<int>(seeds.size()))
      << learned << " of " << seeds.size()
      << " seeds learned a longitudinal profile (r > 0.2, peak inside the calorimeter)";
  std::sort(rs.begin(), rs.end());
  EXPECT_GT(rs[rs.size() / 2], kMedianR) << "median over seeds of the median of the last three r";
}

}  // namespace
}  // namespace gantry::gan
