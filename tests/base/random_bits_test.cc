// base/random_bits.h against the reference implementations' published outputs (splitmix64.c and
// xoshiro256plusplus.c by Vigna; the values were also recomputed with an independent Python
// transcription of both), and the properties its users rely on (the study searches' seed mixing:
// tests/studies).
#include "base/random_bits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

namespace gantry::random_bits {
namespace {

TEST(RandomBitsTest, SplitMix64MatchesTheReference) {
  uint64_t state = 0;
  EXPECT_EQ(SplitMix64(state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(SplitMix64(state), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(SplitMix64(state), 0x06c45d188009454fULL);
  EXPECT_EQ(state, 3 * 0x9e3779b97f4a7c15ULL);
}

TEST(RandomBitsTest, Xoshiro256ppMatchesTheReference) {
  Xoshiro256pp bits({1, 2, 3, 4});
  EXPECT_EQ(bits(), 41943041ULL);
  EXPECT_EQ(bits(), 58720359ULL);
  EXPECT_EQ(bits(), 3588806011781223ULL);
  EXPECT_EQ(bits(), 3591011842654386ULL);

  Xoshiro256pp seeded = Xoshiro256pp::FromSplitMix(42);
  EXPECT_EQ(seeded(), 0xd0764d4f4476689fULL);
  EXPECT_EQ(seeded(), 0x519e4174576f3791ULL);
  EXPECT_EQ(seeded(), 0xfbe07cfb0c24ed8cULL);
}

TEST(RandomBitsTest, UnitIntervalCoversZeroToOneExclusive) {
  EXPECT_EQ(UnitInterval(0), 0.0);
  EXPECT_LT(UnitInterval(~uint64_t{0}), 1.0);
  EXPECT_EQ(UnitInterval(~uint64_t{0}), 1.0 - 0x1.0p-53);
  EXPECT_EQ(UnitInterval(uint64_t{1} << 63), 0.5);
}

TEST(RandomBitsTest, WorksWithStandardAlgorithms) {
  Xoshiro256pp bits = Xoshiro256pp::FromSplitMix(7);
  std::vector<int> v = {1, 2, 3, 4, 5, 6, 7, 8};
  std::shuffle(v.begin(), v.end(), bits);
  EXPECT_EQ(std::set<int>(v.begin(), v.end()).size(), 8u);
  Xoshiro256pp again = Xoshiro256pp::FromSplitMix(7);
  std::vector<int> w = {1, 2, 3, 4, 5, 6, 7, 8};
  std::shuffle(w.begin(), w.end(), again);
  EXPECT_EQ(v, w);
}

}  // namespace
}  // namespace gantry::random_bits
