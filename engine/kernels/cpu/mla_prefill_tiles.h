#pragma once
// The register-tiled loops of the expanded MLA attention (mla_prefill.h), written once over GCC
// vector types of kLanes floats and compiled by each variant's file with its own ISA flags:
// mla_prefill.cc (portable: 4 lanes, the x86-64 baseline), avx2/mla_prefill_avx2.cc (8 lanes),
// avx512/mla_prefill_avx512.cc (16 lanes). The functions have internal linkage, so the copies
// built with different flags never meet at link time. No intrinsics here.
//
// Both loops hold up to 16 vector accumulators (8 with AVX2's 16 registers) and keep every
// output element's arithmetic one chain in a fixed order (over d for a score, over keys for a
// sum), so an element's bits do not depend on which other queries share its pass. The variants'
// files are compiled with -ffp-contract=fast: each step of a chain is one fused multiply-add
// where the ISA has them (AVX2, AVX-512), a multiply then an add otherwise.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/kernels/cpu/mla_prefill.h"

namespace tandem::engine::kernels::cpu::prefill_tiles {

inline constexpr int64_t kBlock = kMlaPrefillKeyBlock;

// GCC drops a vector_size attribute whose size depends on a template parameter, so each width is
// named outright.
typedef float Vec4 __attribute__((vector_size(16)));
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16 __attribute__((vector_size(64)));
template <int kLanes>
struct VecOf;
template <>
struct VecOf<4> {
  using type = Vec4;
};
template <>
struct VecOf<8> {
  using type = Vec8;
};
template <>
struct VecOf<16> {
  using type = Vec16;
};
template <int kLanes>
using Vec = typename VecOf<kLanes>::type;
static_assert(sizeof(Vec<16>) == 16 * sizeof(float));

template <int kLanes>
static inline Vec<kLanes> Load(const float* p) {
  Vec<kLanes> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <int kLanes>
static inline void Store(float* p, Vec<kLanes> v) {
  std::memcpy(p, &v, sizeof(v));
}

// a·b + c as the vector loops compute it: fused where the ISA fuses, so an element's chain is the
// same on every path. (Left to contraction, GCC turned a scalar chain into multiplies of 4 lanes
// and separate adds for all but its last iterations, so a sum's bits depended on its length.)
static inline float MulAdd(float a, float b, float c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return c + a * b;
#endif
}

// s[t·kBlock + j] = Σ_d q[t][d] · kt[d·kBlock + j] for t < nq, j < kBlock, d < width, summed in
// order of d. kt: a key block transposed ([width][kBlock], missing keys zero).
template <int kLanes, int kAccumulators>
static void Scores(const float* const* q, int64_t nq, const float* kt, int64_t width, float* s) {
  using V = Vec<kLanes>;
  constexpr int kCols = static_cast<int>(kBlock / kLanes);  // vectors per query row of scores
  constexpr int kRows = kCols >= kAccumulators ? 1 : kAccumulators / kCols;
  for (int64_t t0 = 0; t0 < nq; t0 += kRows) {
    const int64_t rows = std::min<int64_t>(kRows, nq - t0);
    const float* qs[kRows];
    for (int i = 0; i < kRows; ++i) qs[i] = q[t0 + std::min<int64_t>(i, rows - 1)];  // padded: discarded
    V acc[kRows][kCols] = {};
    for (int64_t d = 0; d < width; ++d) {
      V k[kCols];
      for (int c = 0; c < kCols; ++c) k[c] = Load<kLanes>(kt + d * kBlock + c * kLanes);
      for (int i = 0; i < kRows; ++i) {
        const float x = qs[i][d];
        for (int c = 0; c < kCols; ++c) acc[i][c] += x * k[c];
      }
    }
    for (int64_t i = 0; i < rows; ++i) {
      for (int c = 0; c < kCols; ++c) Store<kLanes>(s + (t0 + i) * kBlock + c * kLanes, acc[i][c]);
    }
  }
}

// o[t][d] += Σ_j p[t·kBlock + j] · (v + j·v_stride)[d] for t < nq, d < vdim, over j < n in order.
template <int kLanes, int kAccumulators>
static void Sums(const float* p, int64_t nq, const float* v, int64_t v_stride, int64_t n, int64_t vdim,
                 float* const* o) {
  using V = Vec<kLanes>;
  constexpr int kGroup = 4;  // vectors of a row summed in one pass over the keys
  constexpr int kRows = kAccumulators / kGroup;
  int64_t d0 = 0;
  auto pass = [&](auto group) {  // the columns [d0, d0 + group · kLanes) of every query
    constexpr int g = decltype(group)::value;
    for (int64_t t0 = 0; t0 < nq; t0 += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, nq - t0);
      int64_t ts[kRows];
      for (int i = 0; i < kRows; ++i) ts[i] = t0 + std::min<int64_t>(i, rows - 1);
      V acc[kRows][g];
      for (int i = 0; i < kRows; ++i) {
        for (int c = 0; c < g; ++c) acc[i][c] = Load<kLanes>(o[ts[i]] + d0 + c * kLanes);
      }
      for (int64_t j = 0; j < n; ++j) {
        V x[g];
        for (int c = 0; c < g; ++c) x[c] = Load<kLanes>(v + j * v_stride + d0 + c * kLanes);
        for (int i = 0; i < kRows; ++i) {
          const float w = p[ts[i] * kBlock + j];
          for (int c = 0; c < g; ++c) acc[i][c] += w * x[c];
        }
      }
      for (int64_t i = 0; i < rows; ++i) {
        for (int c = 0; c < g; ++c) Store<kLanes>(o[t0 + i] + d0 + c * kLanes, acc[i][c]);
      }
    }
    d0 += g * kLanes;
  };
  while (d0 + kGroup * kLanes <= vdim) pass(std::integral_constant<int, kGroup>());
  while (d0 + kLanes <= vdim) pass(std::integral_constant<int, 1>());
  for (; d0 < vdim; ++d0) {  // the last columns, one at a time: the same chain per element
    for (int64_t t = 0; t < nq; ++t) {
      float acc = o[t][d0];
      for (int64_t j = 0; j < n; ++j) acc = MulAdd(p[t * kBlock + j], v[j * v_stride + d0], acc);
      o[t][d0] = acc;
    }
  }
}

}  // namespace tandem::engine::kernels::cpu::prefill_tiles
