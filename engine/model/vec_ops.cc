#include "engine/model/vec_ops.h"

#include <algorithm>

#include "engine/core/cpu_features.h"
#include "engine/formats/float_codecs.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tandem::engine::model {
namespace {

double DotPortable(const float* a, const float* b, int64_t n) {
  double acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    acc0 += static_cast<double>(a[i]) * b[i];
    acc1 += static_cast<double>(a[i + 1]) * b[i + 1];
    acc2 += static_cast<double>(a[i + 2]) * b[i + 2];
    acc3 += static_cast<double>(a[i + 3]) * b[i + 3];
  }
  for (; i < n; ++i) acc0 += static_cast<double>(a[i]) * b[i];
  return (acc0 + acc1) + (acc2 + acc3);
}

double DotPortable(const double* a, const float* b, int64_t n) {
  double acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    acc0 += a[i] * b[i];
    acc1 += a[i + 1] * b[i + 1];
    acc2 += a[i + 2] * b[i + 2];
    acc3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) acc0 += a[i] * b[i];
  return (acc0 + acc1) + (acc2 + acc3);
}

#if defined(__x86_64__)
// Separate multiply and add (no -mfma on this file, no _mm256_fmadd_pd): exact products.
__attribute__((target("avx2"))) double DotAvx2(const float* a, const float* b, int64_t n) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256d a0 = _mm256_cvtps_pd(_mm_loadu_ps(a + i)), b0 = _mm256_cvtps_pd(_mm_loadu_ps(b + i));
    const __m256d a1 = _mm256_cvtps_pd(_mm_loadu_ps(a + i + 4)),
                  b1 = _mm256_cvtps_pd(_mm_loadu_ps(b + i + 4));
    acc0 = _mm256_add_pd(acc0, _mm256_mul_pd(a0, b0));
    acc1 = _mm256_add_pd(acc1, _mm256_mul_pd(a1, b1));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(acc0, acc1));
  double tail = 0;
  for (; i < n; ++i) tail += static_cast<double>(a[i]) * b[i];
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + tail;
}

// Four accumulators of four lanes (16 products in flight): the add latency no longer bounds the
// loop, one conversion per four products instead of two.
__attribute__((target("avx2"))) double DotAvx2(const double* a, const float* b, int64_t n) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd(), acc2 = _mm256_setzero_pd(),
          acc3 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_add_pd(acc0, _mm256_mul_pd(_mm256_loadu_pd(a + i), _mm256_cvtps_pd(_mm_loadu_ps(b + i))));
    acc1 = _mm256_add_pd(acc1,
                         _mm256_mul_pd(_mm256_loadu_pd(a + i + 4), _mm256_cvtps_pd(_mm_loadu_ps(b + i + 4))));
    acc2 = _mm256_add_pd(acc2,
                         _mm256_mul_pd(_mm256_loadu_pd(a + i + 8), _mm256_cvtps_pd(_mm_loadu_ps(b + i + 8))));
    acc3 = _mm256_add_pd(
        acc3, _mm256_mul_pd(_mm256_loadu_pd(a + i + 12), _mm256_cvtps_pd(_mm_loadu_ps(b + i + 12))));
  }
  for (; i + 4 <= n; i += 4)
    acc0 = _mm256_add_pd(acc0, _mm256_mul_pd(_mm256_loadu_pd(a + i), _mm256_cvtps_pd(_mm_loadu_ps(b + i))));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(_mm256_add_pd(acc0, acc1), _mm256_add_pd(acc2, acc3)));
  double tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + tail;
}

__attribute__((target("avx2"))) void AddScaledAvx2(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
  for (; i < n; ++i) y[i] += a * x[i];
}

// 64 columns at a time in 8 registers, all rows, then the next 64; the tail scalar.
__attribute__((target("avx2"))) void WeightedRowSumAvx2(const float* w, const float* rows, int64_t n,
                                                        int64_t stride, int64_t dim, float* out) {
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

__attribute__((target("avx2"))) void Bf16ToF32Avx2(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
  }
  for (; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}
#endif

#if defined(__x86_64__)
const bool kHostAvx2 = HostCpuFeatures().avx2;
#endif

}  // namespace

void Bf16ToF32(const uint16_t* in, float* out, int64_t n) {
#if defined(__x86_64__)
  if (kHostAvx2) {
    Bf16ToF32Avx2(in, out, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}

void AddScaledF32(float a, const float* x, float* y, int64_t n) {
#if defined(__x86_64__)
  if (kHostAvx2) {
    AddScaledAvx2(a, x, y, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim, float* out) {
#if defined(__x86_64__)
  if (kHostAvx2) {
    WeightedRowSumAvx2(w, rows, n, stride, dim, out);
    return;
  }
#endif
  std::fill(out, out + dim, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    if (w[j] != 0.0f) AddScaledF32(w[j], rows + j * stride, out, dim);
  }
}

double DotF64(const float* a, const float* b, int64_t n) {
#if defined(__x86_64__)
  if (kHostAvx2) return DotAvx2(a, b, n);
#endif
  return DotPortable(a, b, n);
}

double DotF64(const double* a, const float* b, int64_t n) {
#if defined(__x86_64__)
  if (kHostAvx2) return DotAvx2(a, b, n);
#endif
  return DotPortable(a, b, n);
}

void F32ToF64(const float* in, double* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i];
}

}  // namespace tandem::engine::model
