#include "workers/serving/counter_rng.h"

#include <cmath>

namespace gantry::serving {
namespace {

constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;
constexpr uint32_t kW1 = 0xBB67AE85u;
constexpr double kTwoPi = 6.283185307179586476925286766559;

inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

}  // namespace

std::array<uint32_t, 4> CounterRng::Block(uint64_t seed, uint64_t index, uint32_t stream,
                                          uint32_t block) {
  std::array<uint32_t, 4> c = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                               stream, block};
  uint32_t k0 = static_cast<uint32_t>(seed);
  uint32_t k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kM0, c[0], &hi0, &lo0);
    MulHiLo(kM1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    k0 += kW0;
    k1 += kW1;
  }
  return c;
}

double CounterRng::Uniform(uint64_t seed, uint64_t index, uint32_t stream) {
  const std::array<uint32_t, 4> w = Block(seed, index, stream, 0);
  const uint64_t bits = (static_cast<uint64_t>(w[0] >> 5) << 26) | (w[1] >> 6);
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);  // 2^-53
}

void CounterRng::Normal(uint64_t seed, uint64_t index, int64_t dim, float* out) {
  int64_t filled = 0;
  for (uint32_t block = 0; filled < dim; ++block) {
    const std::array<uint32_t, 4> w = Block(seed, index, kNoiseStream, block);
    for (int pair = 0; pair < 2 && filled < dim; ++pair) {
      const double u1 = (static_cast<double>(w[2 * pair]) + 0.5) * (1.0 / 4294967296.0);  // (0,1)
      const double u2 = static_cast<double>(w[2 * pair + 1]) * (1.0 / 4294967296.0);
      const double r = std::sqrt(-2.0 * std::log(u1));
      out[filled++] = static_cast<float>(r * std::cos(kTwoPi * u2));
      if (filled < dim) out[filled++] = static_cast<float>(r * std::sin(kTwoPi * u2));
    }
  }
}

}  // namespace gantry::serving
