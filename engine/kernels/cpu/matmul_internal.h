#pragma once
// Shared between matmul.cc (dispatch, portable path) and the ISA-specific kernel files.
// No intrinsics here: only the files under avx2/ are compiled with -mavx2.

#include <cstdint>
#include <vector>

#include "engine/kernels/cpu/matmul.h"

namespace tandem::engine::kernels::cpu {

// INT4 GEMV activations, quantized once per call and shared by every weight row.
//   q:    [m, G*32] int16 (kInt16) or int8 (kInt8) in natural element order, zero-padded
//   scale:[m, G]    fp32 dequantization scale per group (x ≈ q * scale)
//   corr: [m, G]    8 * sum(q) * scale: removes the +8 nibble offset after the unsigned dot
struct QuantizedActivations {
  Int4Activation kind = Int4Activation::kInt16;
  int64_t m = 0;
  int64_t groups = 0;
  std::vector<int16_t> q16;
  std::vector<int8_t> q8;
  std::vector<float> scale;
  std::vector<float> corr;
};

void QuantizeActivations(const float* x, int64_t m, int64_t cols, Int4Activation kind,
                         QuantizedActivations* out);

// Rows [n0, n1) of y = x · Wᵀ for all m activations.
void GemvRowsPortable(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1);

namespace avx2 {
// FP8 GEMV multiplies decoded weights of size value · 2^-120 (fp32 subnormals for the smallest
// codes) by activations pre-scaled by 2^40, so that no product of a real weight and activation
// underflows; the block scale carries the 2^(120-40) back.
constexpr float kFp8ActivationPrescale = 1099511627776.0f;                  // 2^40
constexpr float kFp8ActivationUnscale = 1.0f / 1099511627776.0f;            // 2^-40
constexpr float kFp8TinyToScaledActivation = 1208925819614629174706176.0f;  // 2^80
void GemvBf16(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1);
// x_prescaled: [m, K] activations already multiplied by kFp8ActivationPrescale.
void GemvFp8(const PackedWeight& w, const float* x_prescaled, int64_t m, float* y, int64_t n0, int64_t n1);
void GemvInt4(const PackedWeight& w, const QuantizedActivations& xq, float* y, int64_t n0, int64_t n1);
// Activations for GEMM, in tiles of 6 rows: packed[t*K + k*6 + r] = x[t + r][k] (zero past m).
// packed holds ceil(m/6)*6*K floats.
void PackActivations(const float* x, int64_t m, int64_t k_total, float* packed);
// GEMM for rows [n0, n1) of W (n0 a multiple of kGemmRowGrain), all m packed activations.
void GemmRows(const PackedWeight& w, const float* packed_x, int64_t m, float* y, int64_t n0, int64_t n1);
constexpr int64_t kGemmTileM = 6;
constexpr int64_t kGemmRowGrain = 64;
}  // namespace avx2

}  // namespace tandem::engine::kernels::cpu
