// INT4 GEMV activation quantization, AVX-512, straight into ActivationOrder::kPairs. Compiled with
// the AVX-512 flags of gemv_avx512.cc; called only where HostCpuFeatures().HasAvx512Kernels().
//
// Bit-identical to the portable loop in matmul.cc: the same IEEE operations in the same order
// (|x| max, scale = amax / qmax, inv = 1 / scale, q = round-half-even(x · inv) clamped, corr =
// 8 · Σq · scale), with vcvtps2dq rounding as nearbyint does in the default rounding mode.
#include <cstdint>

#include "engine/kernels/cpu/avx512/simd_avx512.h"
#include "engine/kernels/cpu/matmul_internal.h"

namespace tandem::engine::kernels::cpu::avx512 {
namespace {}  // namespace

void QuantizeRowPairs(const float* x, int64_t cols, Int4Activation kind, void* q, float* scale, float* corr) {
  const bool int16 = kind == Int4Activation::kInt16;
  const float qmax = int16 ? 32767.0f : 127.0f;
  const __m512i hi = _mm512_set1_epi32(int16 ? 32767 : 127), lo = _mm512_set1_epi32(int16 ? -32767 : -127);
  const int64_t groups = (cols + kInt4GroupSize - 1) / kInt4GroupSize;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t k0 = g * kInt4GroupSize;
    const __mmask16 m0 = Mask16(cols - k0), m1 = Mask16(cols - k0 - 16);
    const __m512 v0 = _mm512_maskz_loadu_ps(m0, x + k0), v1 = _mm512_maskz_loadu_ps(m1, x + k0 + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float s = amax > 0.0f ? amax / qmax : 1.0f;
    const __m512 inv = _mm512_set1_ps(1.0f / s);
    const __m512i q0 = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v0, inv)), lo), hi);
    const __m512i q1 = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v1, inv)), lo), hi);
    // Elements 0..15 of group g go to pair (g/2) at (g%2)*16, elements 16..31 32 further on.
    const int64_t at = (g / 2) * 64 + (g % 2) * 16;
    if (int16) {
      int16_t* out = static_cast<int16_t*>(q) + at;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(q0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32), _mm512_cvtepi32_epi16(q1));
    } else {
      int8_t* out = static_cast<int8_t*>(q) + at;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32), _mm512_cvtepi32_epi8(q1));
    }
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    scale[g] = s;
    corr[g] = 8.0f * static_cast<float>(sum) * s;
  }
}

}  // namespace tandem::engine::kernels::cpu::avx512
