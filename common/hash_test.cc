#include "common/hash.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(Hash, SplitMix64MatchesTheReferenceGenerator) {
  // The published first outputs of splitmix64 seeded with 0 (Vigna's reference C code).
  EXPECT_EQ(SplitMix64At(0, 0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(SplitMix64At(0, 1), 0x6e789e6aa1b965f4ull);
  // Counter-based access equals stepping the generator's state.
  uint64_t state = 12345;
  for (uint64_t n = 0; n < 100; ++n)
    EXPECT_EQ(SplitMix64Mix(state += kSplitMix64Gamma), SplitMix64At(12345, n));
}

TEST(Hash, FinalizersSpreadEveryInputBit) {
  for (int bit = 0; bit < 64; ++bit) {
    const uint64_t x = 0x0123456789abcdefull;
    const uint64_t flipped = x ^ (1ull << bit);
    // Avalanche: one flipped input bit changes about half of the output bits.
    EXPECT_GT(__builtin_popcountll(SplitMix64Mix(x) ^ SplitMix64Mix(flipped)), 10) << bit;
    EXPECT_GT(__builtin_popcountll(Fmix64(x) ^ Fmix64(flipped)), 10) << bit;
  }
  EXPECT_EQ(Fmix64(0), 0u);  // fmix64 fixes zero, which is why callers seed it
}

}  // namespace
}  // namespace tandem
