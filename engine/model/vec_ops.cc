#include "engine/model/vec_ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>
#include <vector>

#include "engine/core/cpu_features.h"
#include "engine/core/immintrin.h"
#include "engine/formats/float_codecs.h"

namespace tandem::engine::model {
namespace {

// ExpF32's constants: inputs below kExpLow give 0 (e^x would be an fp32 subnormal, and products with
// subnormals cost a microcode assist per instruction on Intel cores), above kExpHigh are clamped
// (e^88.7 is still finite); ln 2 split in two so that n · kLn2Hi is exact for |n| < 512.
constexpr float kExpLow = -87.33654f;  // ln(FLT_MIN)
constexpr float kExpHigh = 88.7f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;
constexpr float kLn2Lo = 1.42860682030941723e-6f;
// 1/k! for k = 7 down to 2: e^r by its Taylor series to degree 7 on |r| <= ln2/2 (truncation
// below 6e-9 relative, under an ulp).
constexpr float kExpTaylor[] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f};

float ExpScalar(float x) {
  if (!(x >= kExpLow)) return x != x ? x : 0.0f;  // NaN stays NaN
  x = std::min(x, kExpHigh);
  const float n = std::nearbyint(x * kLog2e);
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = kExpTaylor[0];
  for (int k = 1; k < 6; ++k) p = p * r + kExpTaylor[k];
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return std::ldexp(p, static_cast<int>(n));
}

#if defined(__x86_64__)
// ExpScalar on 16 lanes, the same operations in the same order (scalef is ldexp, rounded once).
__attribute__((target("avx512f"))) void ExpF32Avx512(const float* x, float* y, int64_t n) {
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

// fp32 products fused into fp32 accumulators: 4 chains of 8 lanes (32 products in flight).
__attribute__((target("avx2,fma"))) float DotF32Avx2(const float* a, const float* b, int64_t n) {
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

// The same with 4 chains of 16 lanes; the last partial vector is a masked load (no scalar tail).
__attribute__((target("avx512f"))) float DotF32Avx512(const float* a, const float* b, int64_t n) {
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

// WeightedRowSumAvx2 with 16-lane registers: the same multiply-then-add per element, so the same
// bits.
__attribute__((target("avx512f"))) void WeightedRowSumAvx512(const float* w, const float* rows, int64_t n,
                                                             int64_t stride, int64_t dim, float* out) {
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

__attribute__((target("avx512f"))) void Bf16ToF32Avx512(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
  }
  for (; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
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
// 2^e for integer lanes e in fp32's normal range, built in the exponent field.
__attribute__((target("avx2"))) inline __m256 Pow2Avx2(__m256i e) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
}

// ExpScalar on 8 lanes: the same operations in the same order; 2^n applied as two exact powers of
// two (n split in halves, each within fp32's normal range), so the result is rounded once, as
// ldexp rounds it.
__attribute__((target("avx2"))) void ExpF32Avx2(const float* x, float* y, int64_t n) {
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
    __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, Pow2Avx2(k1)), Pow2Avx2(_mm256_sub_epi32(ki, k1)));
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

#endif

// The widest variant each call may take: the host's, unless a test lowered it.
std::atomic<VecIsa> g_isa_limit{VecIsa::kAvx512};

#if defined(__x86_64__)
const bool kHostAvx2 = HostCpuFeatures().avx2;
const bool kHostAvx2Fma = HostCpuFeatures().avx2 && HostCpuFeatures().fma;
const bool kHostAvx512 = HostCpuFeatures().avx512f;
const bool kHostAvx512Bw = HostCpuFeatures().avx512f && HostCpuFeatures().avx512bw;
// The test limit and the process-wide ceiling (TANDEM_ISA, engine/core/cpu_features.h) both apply.
bool Allow(VecIsa isa) {
  return g_isa_limit.load(std::memory_order_relaxed) >= isa &&
         static_cast<int>(KernelIsaCeiling()) >= static_cast<int>(isa);
}
bool UseAvx2() { return kHostAvx2 && Allow(VecIsa::kAvx2); }
bool UseAvx2Fma() { return kHostAvx2Fma && Allow(VecIsa::kAvx2); }
bool UseAvx512() { return kHostAvx512 && Allow(VecIsa::kAvx512); }
#endif

}  // namespace

void LimitVecOpsIsaForTesting(VecIsa widest) { g_isa_limit.store(widest, std::memory_order_relaxed); }

bool VecOpsHostRuns(VecIsa isa) {
#if defined(__x86_64__)
  if (isa == VecIsa::kAvx512) return kHostAvx512Bw;
  if (isa == VecIsa::kAvx2) return kHostAvx2Fma;
#endif
  return isa == VecIsa::kPortable;
}

VecIsa ActiveVecOpsIsa() {
  for (VecIsa isa : {VecIsa::kAvx512, VecIsa::kAvx2}) {
    if (VecOpsHostRuns(isa) && g_isa_limit.load(std::memory_order_relaxed) >= isa &&
        static_cast<int>(KernelIsaCeiling()) >= static_cast<int>(isa))
      return isa;
  }
  return VecIsa::kPortable;
}

void Bf16ToF32(const uint16_t* in, float* out, int64_t n) {
#if defined(__x86_64__)
  if (UseAvx512()) {
    Bf16ToF32Avx512(in, out, n);
    return;
  }
  if (UseAvx2()) {
    Bf16ToF32Avx2(in, out, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}

void AddScaledF32(float a, const float* x, float* y, int64_t n) {
#if defined(__x86_64__)
  if (UseAvx2()) {
    AddScaledAvx2(a, x, y, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim, float* out) {
#if defined(__x86_64__)
  if (UseAvx512()) {
    WeightedRowSumAvx512(w, rows, n, stride, dim, out);
    return;
  }
  if (UseAvx2()) {
    WeightedRowSumAvx2(w, rows, n, stride, dim, out);
    return;
  }
#endif
  std::fill(out, out + dim, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    if (w[j] != 0.0f) AddScaledF32(w[j], rows + j * stride, out, dim);
  }
}

float DotF32(const float* a, const float* b, int64_t n) {
#if defined(__x86_64__)
  if (UseAvx512()) return DotF32Avx512(a, b, n);
  if (UseAvx2Fma()) return DotF32Avx2(a, b, n);
#endif
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void ExpF32(const float* x, float* y, int64_t n) {
#if defined(__x86_64__)
  if (UseAvx512()) {
    ExpF32Avx512(x, y, n);
    return;
  }
  if (UseAvx2()) {
    ExpF32Avx2(x, y, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = ExpScalar(x[i]);
}

}  // namespace tandem::engine::model
