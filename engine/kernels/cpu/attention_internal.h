#pragma once
// The ISA variants behind engine/kernels/cpu/attention.h (same contracts), defined in
// avx512/attention_avx512.cc and avx2/attention_avx2.cc, which only attention.cc calls, after
// ActiveKernelIsa() says the host runs them. No intrinsics here.

#include <cstdint>
#include <type_traits>

#include "engine/kernels/cpu/attention.h"

namespace tandem::engine::kernels::cpu {

// Calls fn(first, std::integral_constant<int, K>{}) for consecutive groups of K <= 4 of `count`
// items: the kernels are templates on K so that their accumulators stay in registers.
template <typename Fn>
void InGroupsOf4(int64_t count, const Fn& fn) {
  int64_t i = 0;
  for (; i + 4 <= count; i += 4) fn(i, std::integral_constant<int, 4>{});
  switch (count - i) {
    case 3: fn(i, std::integral_constant<int, 3>{}); break;
    case 2: fn(i, std::integral_constant<int, 2>{}); break;
    case 1: fn(i, std::integral_constant<int, 1>{}); break;
    default: break;
  }
}

namespace avx512 {
void AttentionScores(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n, int64_t width,
                     float* out, int64_t out_stride);
void AttentionWeightedSums(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n, int64_t dim,
                           float* out, int64_t out_stride);
void Fp8RowsToBf16(RowsRef rows, int64_t n, int64_t width, uint16_t* out);
}  // namespace avx512

namespace avx2 {
void AttentionScores(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n, int64_t width,
                     float* out, int64_t out_stride);
void AttentionWeightedSums(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n, int64_t dim,
                           float* out, int64_t out_stride);
void Fp8RowsToBf16(RowsRef rows, int64_t n, int64_t width, uint16_t* out);
}  // namespace avx2

}  // namespace tandem::engine::kernels::cpu
