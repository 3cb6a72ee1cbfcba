// A RandomSource is the searches' deterministic random number generator: the same seed gives the
// same numbers with every compiler and standard library (std::*_distribution does not promise
// that), so suggestions replay exactly.
#ifndef GANTRY_STUDIES_RANDOM_SOURCE_H_
#define GANTRY_STUDIES_RANDOM_SOURCE_H_

#include <cmath>
#include <cstdint>
#include <random>

#include "base/random_bits.h"

namespace gantry::studies {

class RandomSource {
 public:
  explicit RandomSource(uint64_t seed) : engine_(seed) {}

  // splitmix64's finaliser: mixes a seed with a stream number (e.g. the history's size) into a
  // well-spread seed.
  static uint64_t Mix(uint64_t seed, uint64_t stream) {
    uint64_t state = seed + 0x9e3779b97f4a7c15ULL * stream;
    return random_bits::SplitMix64(state);  // adds the increment once more
  }

  // Uniform in [0, 1).
  double Uniform() { return random_bits::UnitInterval(engine_()); }

  // Uniform in {0, ..., n - 1} for n >= 1 (the tiny modulo bias of 64-bit numbers is ignored).
  uint64_t Below(uint64_t n) { return engine_() % n; }

  // Standard normal (Box-Muller; one of the pair is dropped to keep the state simple).
  double Normal() {
    double u1 = 0;
    while (u1 <= 0) u1 = Uniform();
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace gantry::studies

#endif  // GANTRY_STUDIES_RANDOM_SOURCE_H_
