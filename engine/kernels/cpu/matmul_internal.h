#pragma once
// Shared between matmul.cc (dispatch, portable path) and the ISA-specific kernel files.
// No intrinsics here: only the files under avx2/ are compiled with -mavx2.

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "engine/kernels/cpu/matmul.h"

namespace tandem::engine::kernels::cpu {

// Element order of QuantizedActivations::q16 / q8 within one activation row.
//   kNatural: element k of group g at g*32 + k (the AVX2 kernels).
//   kPairs:   groups taken two at a time, each pair (g, g+1) stored as 64 elements
//             [g 0..15 | g+1 0..15 | g 16..31 | g+1 16..31], rows padded with zero groups to a
//             multiple of 8 groups (the AVX-512 kernels: one 512-bit load of nibbles covers a pair).
enum class ActivationOrder { kNatural, kPairs };

// INT4 GEMV activations, quantized once per call and shared by every weight row.
//   q:    [m, row_elements] int16 (kInt16) or int8 (kInt8) in `order`, zero-padded
//   scale:[m, G]    fp32 dequantization scale per group (x ≈ q * scale)
//   corr: [m, G]    8 * sum(q) * scale: removes the +8 nibble offset after the unsigned dot
struct QuantizedActivations {
  Int4Activation kind = Int4Activation::kInt16;
  ActivationOrder order = ActivationOrder::kNatural;
  int64_t m = 0;
  int64_t groups = 0;
  int64_t row_elements = 0;  // G*32 (kNatural) or ceil(G/8)*8*32 (kPairs)
  std::vector<int16_t> q16;
  std::vector<int8_t> q8;
  std::vector<float> scale;
  std::vector<float> corr;
};

void QuantizeActivations(const float* x, int64_t m, int64_t cols, Int4Activation kind,
                         QuantizedActivations* out, ActivationOrder order = ActivationOrder::kNatural);

// The GEMV kernels' batching, shared by every ISA: batches above 4 run in slices of 4 activation
// rows over blocks of kGemvRowBlock weight rows, so each block is read from DRAM once and re-read
// from L2 by the other slices. slice(i0, rows, n_begin, n_end) with rows in 1..4.
constexpr int64_t kGemvRowBlock = 16;

template <typename Slice>
void ForEachSlice(int64_t m, int64_t n0, int64_t n1, const Slice& slice) {
  if (m <= 4) {
    slice(0, m, n0, n1);
    return;
  }
  for (int64_t nb = n0; nb < n1; nb += kGemvRowBlock) {
    const int64_t ne = std::min(n1, nb + kGemvRowBlock);
    for (int64_t i0 = 0; i0 < m; i0 += 4) slice(i0, std::min<int64_t>(4, m - i0), nb, ne);
  }
}

// Calls fn(std::integral_constant<int, M>{}) for M = rows in 1..4: the kernels are templates on M
// so their accumulators live in registers.
template <typename Fn>
void WithRows(int64_t rows, const Fn& fn) {
  switch (rows) {
    case 1: fn(std::integral_constant<int, 1>{}); break;
    case 2: fn(std::integral_constant<int, 2>{}); break;
    case 3: fn(std::integral_constant<int, 3>{}); break;
    default: fn(std::integral_constant<int, 4>{}); break;
  }
}

// Rows [n0, n1) of y = x · Wᵀ for all m activations.
void GemvRowsPortable(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1);

namespace avx2 {
// FP8 GEMV multiplies decoded weights of size value · 2^-8 (fp16 subnormals widened for the
// smallest codes, which are fp32 normals) by activations pre-scaled by 2^40, so that no product of
// a real weight and activation underflows to an fp32 subnormal; the block scale carries the
// 2^(8-40) back.
constexpr float kFp8ActivationPrescale = 1099511627776.0f;        // 2^40
constexpr float kFp8ActivationUnscale = 1.0f / 1099511627776.0f;  // 2^-40
// The direct decode (GemvFp8Direct) makes value · 2^-120 (e4m3 subnormals as fp32 subnormals) and
// takes activations pre-scaled by 2^90: products of value · x stay fp32 normals down to |value · x|
// = 2^-96, and activations up to 2^38 do not overflow.
constexpr float kFp8DirectPrescale = 1237940039285380274899124224.0f;  // 2^90
constexpr float kFp8DirectUnscale = 1.0f / 1237940039285380274899124224.0f;
void GemvBf16(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1);
// x_prescaled: [m, K] activations already multiplied by kFp8ActivationPrescale.
void GemvFp8(const PackedWeight& w, const float* x_prescaled, int64_t m, float* y, int64_t n0, int64_t n1);
// x_prescaled by kFp8DirectPrescale. The same sums as GemvFp8, from a cheaper decode whose
// subnormal weights cost a microcode assist per FMA on Intel cores: for hosts where
// SubnormalFmaIsFast().
void GemvFp8Direct(const PackedWeight& w, const float* x_prescaled, int64_t m, float* y, int64_t n0,
                   int64_t n1);
// Whether an FMA with an fp32 subnormal input runs at full speed here (measured once, ~0.1 ms).
bool SubnormalFmaIsFast();
// One activation row x[cols] quantized as QuantizeActivations does, bit for bit, in
// ActivationOrder::kNatural: q (int16_t* for kInt16, int8_t* for kInt8) gets G*32 elements (zero
// past cols), scale and corr G floats each.
void QuantizeRowNatural(const float* x, int64_t cols, Int4Activation kind, void* q, float* scale,
                        float* corr);
void GemvInt4(const PackedWeight& w, const QuantizedActivations& xq, float* y, int64_t n0, int64_t n1);
// Activations for GEMM, in tiles of 6 rows: packed[t*K + k*6 + r] = x[t + r][k] (zero past m).
// packed holds ceil(m/6)*6*K floats.
void PackActivations(const float* x, int64_t m, int64_t k_total, float* packed);
// Row n's weights [k0, k0 + kc) decoded to fp32 with SIMD: the GEMM's panels and DecodeWeightRow.
// REQUIRES: k0 a multiple of 128.
void DecodeRowChunk(const PackedWeight& w, int64_t n, int64_t k0, int64_t kc, float* out);
// GEMM for rows [n0, n1) of W (n0 a multiple of kGemmRowGrain), all m packed activations.
void GemmRows(const PackedWeight& w, const float* packed_x, int64_t m, float* y, int64_t n0, int64_t n1);
constexpr int64_t kGemmTileM = 6;
constexpr int64_t kGemmRowGrain = 64;
}  // namespace avx2

// AVX-512 (F/BW/VL/DQ/VNNI) GEMV kernels, same contracts as the avx2 ones; decode only (the GEMM
// path stays AVX2). GemvFp8 takes activations prescaled by avx2::kFp8ActivationPrescale; GemvInt4
// REQUIRES xq.order == ActivationOrder::kPairs.
namespace avx512 {
void GemvBf16(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1);
void GemvFp8(const PackedWeight& w, const float* x_prescaled, int64_t m, float* y, int64_t n0, int64_t n1);
void GemvFp8Direct(const PackedWeight& w, const float* x_prescaled, int64_t m, float* y, int64_t n0,
                   int64_t n1);
void GemvInt4(const PackedWeight& w, const QuantizedActivations& xq, float* y, int64_t n0, int64_t n1);
// One activation row x[cols] quantized as QuantizeActivations does, bit for bit, into kPairs order:
// q (int16_t* for kInt16, int8_t* for kInt8) gets ceil(G/2)*64 elements (zero where x has none),
// scale and corr G floats each.
void QuantizeRowPairs(const float* x, int64_t cols, Int4Activation kind, void* q, float* scale, float* corr);
}  // namespace avx512

}  // namespace tandem::engine::kernels::cpu
