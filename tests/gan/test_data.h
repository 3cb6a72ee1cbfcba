// Small deterministic shower samples for the gan tests (the toy Monte Carlo of showers/) and
// the networks' weights of a training state, to compare runs.
#ifndef GANTRY_TESTS_GAN_TEST_DATA_H_
#define GANTRY_TESTS_GAN_TEST_DATA_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "showers/shower_set.h"
#include "showers/toy_mc.h"
#include "workers/gan/checkpoint.h"

namespace gantry::gan::testing {

// `events` toy MC showers in the 25^3 layout, 10-500 GeV.
inline showers::ShowerSet FixedAngleShowers(int64_t events, uint64_t seed = 7) {
  showers::ToyMcConfig config;
  config.layout = showers::Layout::kFixedAngle3DGan;
  config.events = events;
  config.seed = seed;
  config.threads = 2;
  auto set = showers::SimulateToyMc(config);
  return set.ok() ? *std::move(set) : showers::ShowerSet{};
}

// Mean longitudinal (z) profile of a set, in GeV per layer.
inline std::vector<double> MeanLongitudinalProfile(const showers::ShowerSet& set) {
  std::vector<double> profile(static_cast<size_t>(set.shape[2]), 0.0);
  const int64_t nz = set.shape[2];
  for (int64_t i = 0; i < set.events(); ++i) {
    const float* e = set.event(i);
    for (int64_t c = 0; c < set.cells_per_event(); ++c) profile[c % nz] += e[c];
  }
  for (double& v : profile) v /= static_cast<double>(std::max<int64_t>(1, set.events()));
  return profile;
}

// Every parameter and buffer of both networks, in registration order.
inline std::vector<at::Tensor> Weights(const TrainingState& s) {
  std::vector<at::Tensor> out;
  for (const auto& p : s.generator->parameters()) out.push_back(p);
  for (const auto& b : s.generator->buffers()) out.push_back(b);
  for (const auto& p : s.discriminator->parameters()) out.push_back(p);
  for (const auto& b : s.discriminator->buffers()) out.push_back(b);
  return out;
}

}  // namespace gantry::gan::testing

#endif  // GANTRY_TESTS_GAN_TEST_DATA_H_
