// CounterRng: a stateless counter-based random generator (Philox4x32-10, Salmon et al., SC'11):
// the numbers for (key, counter) depend on nothing else, so a shower's latent noise and drawn
// conditions follow from (seed, shower index) alone, however requests were batched. Torch-free.
#ifndef GANTRY_WORKERS_SERVING_COUNTER_RNG_H_
#define GANTRY_WORKERS_SERVING_COUNTER_RNG_H_

#include <array>
#include <cstdint>

namespace gantry::serving {

class CounterRng {
 public:
  // Streams of numbers drawn per shower (the counter's third word).
  static constexpr uint32_t kNoiseStream = 0;
  static constexpr uint32_t kEnergyStream = 1;
  static constexpr uint32_t kThetaStream = 2;

  // Philox4x32-10 of the 128-bit counter (index, stream, block) under the 64-bit key `seed`.
  static std::array<uint32_t, 4> Block(uint64_t seed, uint64_t index, uint32_t stream,
                                       uint32_t block);

  // A uniform double in [0, 1) (53 random bits) for (seed, index, stream).
  static double Uniform(uint64_t seed, uint64_t index, uint32_t stream);

  // `dim` standard-normal floats (Box-Muller in double precision) for shower `index` of a request
  // with `seed`: the shower's latent noise. Bit-identical across calls and batchings.
  static void Normal(uint64_t seed, uint64_t index, int64_t dim, float* out);
};

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_COUNTER_RNG_H_
