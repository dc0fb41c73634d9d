// AVX-512 vector loops (engine/kernels/cpu/vector_ops.h). Compiled with the AVX-512 kernel flags
// and -ffp-contract=off (every loop but DotF32 promises the portable loop's multiply-then-add bits);
// vector_ops.cc calls them only when ActiveKernelIsa() is kAvx512.
#include "engine/core/immintrin.h"
#include "engine/kernels/cpu/vector_ops_internal.h"

namespace tandem::engine::kernels::cpu::avx512 {

// ExpScalar on 16 lanes, the same operations in the same order (scalef is ldexp, rounded once).
void ExpF32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m =
        n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __mmask16 keep = _mm512_cmp_ps_mask(v, _mm512_set1_ps(kExpLow), _CMP_GE_OQ);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512 c = _mm512_min_ps(v, _mm512_set1_ps(kExpHigh));
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(kLog2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_sub_ps(_mm512_sub_ps(c, _mm512_mul_ps(k, _mm512_set1_ps(kLn2Hi))),
                                   _mm512_mul_ps(k, _mm512_set1_ps(kLn2Lo)));
    __m512 p = _mm512_set1_ps(kExpTaylor[0]);
    for (int t = 1; t < 6; ++t) p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kExpTaylor[t]));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    __m512 e = _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, k));
    e = _mm512_mask_mov_ps(e, nan, v);
    _mm512_mask_storeu_ps(y + i, m, e);
  }
}

// The same with 4 chains of 16 lanes; the last partial vector is a masked load (no scalar tail).
float DotF32(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(),
         acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), acc3);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

// WeightedRowSum with 16-lane registers: the same multiply-then-add per element, so the same
// bits.
void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim, float* out) {
  int64_t d = 0;
  for (; d + 128 <= dim; d += 128) {
    __m512 acc[8];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; ++j) {
      if (w[j] == 0.0f) continue;
      const __m512 wj = _mm512_set1_ps(w[j]);
      const float* row = rows + j * stride + d;
      for (int k = 0; k < 8; ++k)
        acc[k] = _mm512_add_ps(acc[k], _mm512_mul_ps(wj, _mm512_loadu_ps(row + 16 * k)));
    }
    for (int k = 0; k < 8; ++k) _mm512_storeu_ps(out + d + 16 * k, acc[k]);
  }
  for (; d < dim; d += 16) {
    const __mmask16 m =
        dim - d >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (dim - d)) - 1);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; ++j) {
      if (w[j] == 0.0f) continue;
      acc = _mm512_add_ps(
          acc, _mm512_mul_ps(_mm512_set1_ps(w[j]), _mm512_maskz_loadu_ps(m, rows + j * stride + d)));
    }
    _mm512_mask_storeu_ps(out + d, m, acc);
  }
}

}  // namespace tandem::engine::kernels::cpu::avx512
