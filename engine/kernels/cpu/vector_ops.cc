#include "engine/kernels/cpu/vector_ops.h"

#include <algorithm>
#include <cmath>

#include "engine/core/cpu_features.h"
#include "engine/kernels/cpu/vector_ops_internal.h"

namespace tandem::engine::kernels::cpu {
namespace {

// e^x by the operations every variant runs, in the same order (ldexp rounds once, as the SIMD
// variants' scalef and exponent-field powers of two do).
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

#if defined(TANDEM_HAVE_AVX512_KERNELS)
bool UseAvx512() { return ActiveKernelIsa() == KernelIsa::kAvx512; }
#endif
#if defined(TANDEM_HAVE_AVX2_KERNELS)
bool UseAvx2() { return ActiveKernelIsa() >= KernelIsa::kAvx2; }
#endif

}  // namespace

const char* VectorOpsIsa() {
#if defined(TANDEM_HAVE_AVX512_KERNELS)
  if (UseAvx512()) return KernelIsaName(KernelIsa::kAvx512);
#endif
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (UseAvx2()) return KernelIsaName(KernelIsa::kAvx2);
#endif
  return KernelIsaName(KernelIsa::kPortable);
}

void AddScaledF32(float a, const float* x, float* y, int64_t n) {
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (UseAvx2()) {  // also on AVX-512 hosts: a residual add is memory-bound at 8 lanes already
    avx2::AddScaledF32(a, x, y, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim, float* out) {
#if defined(TANDEM_HAVE_AVX512_KERNELS)
  if (UseAvx512()) {
    avx512::WeightedRowSum(w, rows, n, stride, dim, out);
    return;
  }
#endif
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (UseAvx2()) {
    avx2::WeightedRowSum(w, rows, n, stride, dim, out);
    return;
  }
#endif
  std::fill(out, out + dim, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    if (w[j] == 0.0f) continue;
    const float* row = rows + j * stride;
    for (int64_t d = 0; d < dim; ++d) out[d] += w[j] * row[d];
  }
}

float DotF32(const float* a, const float* b, int64_t n) {
#if defined(TANDEM_HAVE_AVX512_KERNELS)
  if (UseAvx512()) return avx512::DotF32(a, b, n);
#endif
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (UseAvx2()) return avx2::DotF32(a, b, n);
#endif
  return DotF32Portable(a, b, n);
}

float DotF32Portable(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void ExpF32(const float* x, float* y, int64_t n) {
#if defined(TANDEM_HAVE_AVX512_KERNELS)
  if (UseAvx512()) {
    avx512::ExpF32(x, y, n);
    return;
  }
#endif
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (UseAvx2()) {
    avx2::ExpF32(x, y, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = ExpScalar(x[i]);
}

float DotF32Ref(const float* a, const float* b, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(sum);
}

void WeightedRowSumRef(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim,
                       float* out) {
  for (int64_t d = 0; d < dim; ++d) {
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(w[j]) * rows[j * stride + d];
    out[d] = static_cast<float>(sum);
  }
}

void ExpF32Ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!(v >= kExpLow)) {
      y[i] = v != v ? v : 0.0f;
      continue;
    }
    y[i] = static_cast<float>(std::exp(static_cast<double>(std::min(v, kExpHigh))));
  }
}

void AddScaledF32Ref(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(y[i] + static_cast<double>(a) * x[i]);
}

}  // namespace tandem::engine::kernels::cpu
