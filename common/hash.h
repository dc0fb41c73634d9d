#pragma once
// 64-bit integer mixing for seeds, tags and test hashes (not for security): splitmix64 (Steele,
// Lea, Flood 2014) and MurmurHash3's fmix64 finalizer. Results are part of formats and tests
// (dummy weights, seeded sampling, integrity tags), so these functions must never change.

#include <cstdint>

namespace tandem {

// splitmix64's increment (2^64 / golden ratio, odd).
constexpr uint64_t kSplitMix64Gamma = 0x9e3779b97f4a7c15ull;

// splitmix64's output function: a bijection in which every input bit affects every output bit.
constexpr uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The n-th output (n = 0, 1, ...) of the splitmix64 generator seeded with `seed`, computed
// directly (counter-based: no state to carry between draws).
constexpr uint64_t SplitMix64At(uint64_t seed, uint64_t n) {
  return SplitMix64Mix(seed + (n + 1) * kSplitMix64Gamma);
}

// MurmurHash3's 64-bit finalizer (also a bijection).
constexpr uint64_t Fmix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

}  // namespace tandem
