// Random bits that are the same with every compiler and standard library (the std engines' seeding
// and std::*_distribution are not), for what must replay exactly from a seed: the toy Monte Carlo,
// the baselines' sampling, the two-sample classifier and the study searches.
#ifndef GANTRY_BASE_RANDOM_BITS_H_
#define GANTRY_BASE_RANDOM_BITS_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

namespace gantry::random_bits {

// splitmix64 (Steele, Lea and Flood; Vigna's reference): advances `state` by the golden-ratio
// increment and returns the mixed value.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The top 53 bits of `bits` as a double uniform in [0, 1).
inline double UnitInterval(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// xoshiro256++ (Blackman and Vigna): a UniformRandomBitGenerator with 256 bits of state.
class Xoshiro256pp {
 public:
  using result_type = uint64_t;

  explicit Xoshiro256pp(const std::array<uint64_t, 4>& state) : s_(state) {}
  // The state filled with four splitmix64 outputs from `seed` (the authors' recommended seeding).
  static Xoshiro256pp FromSplitMix(uint64_t seed) {
    std::array<uint64_t, 4> state;
    for (uint64_t& word : state) word = SplitMix64(seed);
    return Xoshiro256pp(state);
  }

  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return std::numeric_limits<uint64_t>::max(); }

  uint64_t operator()() {
    const uint64_t result = Rotl(s_[0] + s_[3], 23) + s_[0];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> s_;
};

// Gamma(k, 1), k > 0, by Marsaglia and Tsang (k < 1 through the u^(1/k) boost); 0 for k <= 0.
// `rng` provides Normal() (standard normal) and UniformOpen() (uniform, never 0).
template <typename Rng>
double MarsagliaTsangGamma(Rng& rng, double k) {
  if (k <= 0) return 0.0;
  if (k < 1.0) return MarsagliaTsangGamma(rng, k + 1.0) * std::pow(rng.UniformOpen(), 1.0 / k);
  const double d = k - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = rng.Normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = rng.UniformOpen();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

}  // namespace gantry::random_bits

#endif  // GANTRY_BASE_RANDOM_BITS_H_
