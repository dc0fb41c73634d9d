// AVX2 + FMA vector loops (engine/kernels/cpu/vector_ops.h). Compiled with the AVX2 kernel flags
// and -ffp-contract=off (every loop but DotF32 promises the portable loop's multiply-then-add bits);
// vector_ops.cc calls them only when ActiveKernelIsa() is kAvx2 or wider.
#include <algorithm>

#include "engine/core/immintrin.h"
#include "engine/kernels/cpu/vector_ops_internal.h"

namespace tandem::engine::kernels::cpu::avx2 {
namespace {

// 2^e for integer lanes e in fp32's normal range, built in the exponent field.
__m256 Pow2(__m256i e) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
}

}  // namespace

// fp32 products fused into fp32 accumulators: 4 chains of 8 lanes (32 products in flight).
float DotF32(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(),
         acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  const __m256 acc = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void AddScaledF32(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
  for (; i < n; ++i) y[i] += a * x[i];
}

// 64 columns at a time in 8 registers, all rows, then the next 64; the tail scalar.
void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim, float* out) {
  int64_t d = 0;
  for (; d + 64 <= dim; d += 64) {
    __m256 acc[8];
    for (__m256& a : acc) a = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; ++j) {
      if (w[j] == 0.0f) continue;
      const __m256 wj = _mm256_set1_ps(w[j]);
      const float* row = rows + j * stride + d;
      for (int k = 0; k < 8; ++k)
        acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(wj, _mm256_loadu_ps(row + 8 * k)));
    }
    for (int k = 0; k < 8; ++k) _mm256_storeu_ps(out + d + 8 * k, acc[k]);
  }
  for (; d + 8 <= dim; d += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; ++j) {
      if (w[j] == 0.0f) continue;
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(rows + j * stride + d)));
    }
    _mm256_storeu_ps(out + d, acc);
  }
  for (; d < dim; ++d) {
    float acc = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      if (w[j] != 0.0f) acc += w[j] * rows[j * stride + d];
    }
    out[d] = acc;
  }
}

// ExpScalar on 8 lanes: the same operations in the same order; 2^n applied as two exact powers of
// two (n split in halves, each within fp32's normal range), so the result is rounded once, as
// ldexp rounds it.
void ExpF32(const float* x, float* y, int64_t n) {
  float tail_in[8], tail_out[8];
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t left = std::min<int64_t>(8, n - i);
    const float* src = x + i;
    if (left < 8) {
      std::fill(tail_in, tail_in + 8, 0.0f);
      std::copy_n(x + i, left, tail_in);
      src = tail_in;
    }
    const __m256 v = _mm256_loadu_ps(src);
    const __m256 keep = _mm256_cmp_ps(v, _mm256_set1_ps(kExpLow), _CMP_GE_OQ);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    const __m256 c = _mm256_min_ps(v, _mm256_set1_ps(kExpHigh));
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(c, _mm256_set1_ps(kLog2e)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 r = _mm256_sub_ps(_mm256_sub_ps(c, _mm256_mul_ps(k, _mm256_set1_ps(kLn2Hi))),
                                   _mm256_mul_ps(k, _mm256_set1_ps(kLn2Lo)));
    __m256 p = _mm256_set1_ps(kExpTaylor[0]);
    for (int t = 1; t < 6; ++t) p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpTaylor[t]));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    const __m256i ki = _mm256_cvtps_epi32(k);
    const __m256i k1 = _mm256_srai_epi32(ki, 1);
    __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, Pow2(k1)), Pow2(_mm256_sub_epi32(ki, k1)));
    e = _mm256_and_ps(e, keep);
    e = _mm256_blendv_ps(e, v, nan);
    if (left < 8) {
      _mm256_storeu_ps(tail_out, e);
      std::copy_n(tail_out, left, y + i);
    } else {
      _mm256_storeu_ps(y + i, e);
    }
  }
}

}  // namespace tandem::engine::kernels::cpu::avx2
