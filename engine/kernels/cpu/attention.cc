// Dispatch and portable variant of the attention kernels (attention.h). Compiled with
// -ffp-contract=off: the portable loops multiply, then add, as their contracts say.
#include "engine/kernels/cpu/attention.h"

#include <vector>

#include "engine/core/cpu_features.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/attention_internal.h"
#include "engine/kernels/cpu/vector_ops_internal.h"

namespace tandem::engine::kernels::cpu {
namespace {

// Row j widened into `out` [width].
void WidenRow(RowsRef rows, int64_t j, int64_t width, float* out) {
  if (rows.format == RowFormat::kBf16) {
    const uint16_t* r = static_cast<const uint16_t*>(rows.data) + j * rows.stride;
    for (int64_t d = 0; d < width; ++d) out[d] = Bf16ToFloat(r[d]);
  } else {
    for (int64_t d = 0; d < width; ++d) out[d] = RowValue(rows, j, d);
  }
}

}  // namespace

float RowValue(RowsRef rows, int64_t j, int64_t i) {
  const int64_t at = j * rows.stride + i;
  if (rows.format == RowFormat::kBf16) return Bf16ToFloat(static_cast<const uint16_t*>(rows.data)[at]);
  const uint8_t code = static_cast<const uint8_t*>(rows.data)[at];
  if ((code & 0x7f) == 0x7f)
    return (code & 0x80) != 0 ? -480.0f : 480.0f;  // (unspecified: the SIMD decode's)
  return Fp8E4M3ToFloat(code);
}

void RowsToF32(RowsRef rows, int64_t n, int64_t width, float scale, float* out) {
  if (rows.format == RowFormat::kBf16) {
    for (int64_t j = 0; j < n; ++j) WidenRow(rows, j, width, out + j * width);
    return;
  }
  float table[256];
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    table[c] = RowValue({&code, RowFormat::kFp8E4M3, 0}, 0, 0) * scale;
  }
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* r = static_cast<const uint8_t*>(rows.data) + j * rows.stride;
    for (int64_t d = 0; d < width; ++d) out[j * width + d] = table[r[d]];
  }
}

void Fp8RowsToBf16(RowsRef rows, int64_t n, int64_t width, uint16_t* out) {
#if defined(TANDEM_HAVE_AVX512_KERNELS)
  if (ActiveKernelIsa() == KernelIsa::kAvx512) {
    avx512::Fp8RowsToBf16(rows, n, width, out);
    return;
  }
#endif
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (ActiveKernelIsa() >= KernelIsa::kAvx2) {
    avx2::Fp8RowsToBf16(rows, n, width, out);
    return;
  }
#endif
  uint16_t table[256];
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    table[c] = FloatToBf16(RowValue({&code, RowFormat::kFp8E4M3, 0}, 0, 0));
  }
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* r = static_cast<const uint8_t*>(rows.data) + j * rows.stride;
    for (int64_t d = 0; d < width; ++d) out[j * width + d] = table[r[d]];
  }
}

const char* AttentionIsa() { return KernelIsaName(ActiveKernelIsa()); }

void AttentionScores(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n, int64_t width,
                     float* out, int64_t out_stride) {
#if defined(TANDEM_HAVE_AVX512_KERNELS)
  if (ActiveKernelIsa() == KernelIsa::kAvx512) {
    avx512::AttentionScores(q, nq, q_stride, rows, n, width, out, out_stride);
    return;
  }
#endif
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (ActiveKernelIsa() >= KernelIsa::kAvx2) {
    avx2::AttentionScores(q, nq, q_stride, rows, n, width, out, out_stride);
    return;
  }
#endif
  thread_local std::vector<float> row;
  row.resize(width);
  for (int64_t j = 0; j < n; ++j) {
    WidenRow(rows, j, width, row.data());
    for (int64_t h = 0; h < nq; ++h)
      out[h * out_stride + j] = DotF32Portable(q + h * q_stride, row.data(), width);
  }
}

void AttentionWeightedSums(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n, int64_t dim,
                           float* out, int64_t out_stride) {
#if defined(TANDEM_HAVE_AVX512_KERNELS)
  if (ActiveKernelIsa() == KernelIsa::kAvx512) {
    avx512::AttentionWeightedSums(w, nw, w_stride, rows, n, dim, out, out_stride);
    return;
  }
#endif
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (ActiveKernelIsa() >= KernelIsa::kAvx2) {
    avx2::AttentionWeightedSums(w, nw, w_stride, rows, n, dim, out, out_stride);
    return;
  }
#endif
  thread_local std::vector<float> row;
  row.resize(dim);
  for (int64_t j = 0; j < n; ++j) {
    bool any = false;
    for (int64_t h = 0; h < nw; ++h) any = any || w[h * w_stride + j] != 0.0f;
    if (!any) continue;
    WidenRow(rows, j, dim, row.data());
    for (int64_t h = 0; h < nw; ++h) {
      const float wh = w[h * w_stride + j];
      if (wh == 0.0f) continue;
      float* o = out + h * out_stride;
      for (int64_t d = 0; d < dim; ++d) o[d] += wh * row[d];
    }
  }
}

void AttentionScoresRef(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n, int64_t width,
                        float* out, int64_t out_stride) {
  for (int64_t h = 0; h < nq; ++h) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t d = 0; d < width; ++d)
        s += static_cast<double>(q[h * q_stride + d]) * RowValue(rows, j, d);
      out[h * out_stride + j] = static_cast<float>(s);
    }
  }
}

void AttentionWeightedSumsRef(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n,
                              int64_t dim, float* out, int64_t out_stride) {
  for (int64_t h = 0; h < nw; ++h) {
    for (int64_t d = 0; d < dim; ++d) {
      double s = out[h * out_stride + d];
      for (int64_t j = 0; j < n; ++j) s += static_cast<double>(w[h * w_stride + j]) * RowValue(rows, j, d);
      out[h * out_stride + d] = static_cast<float>(s);
    }
  }
}

}  // namespace tandem::engine::kernels::cpu
