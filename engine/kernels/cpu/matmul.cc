#include <algorithm>
#include <cmath>
#include <string>

#include "engine/core/cpu_features.h"
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/matmul_internal.h"

namespace tandem::engine::kernels::cpu {
namespace {

// Rows handed to one thread at a time: whole GEMM panels, and enough GEMV rows to amortize.
constexpr int64_t kRowGrain = 16;

bool UseAvx2(const MatmulOptions& options) {
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  return !options.force_portable && HostCpuFeatures().HasAvx2Kernels();
#else
  (void)options;
  return false;
#endif
}

// One weight row decoded to fp32 (the portable path's inner step).
void DecodeRow(const PackedWeight& w, int64_t n, float* out) {
  const int64_t k_total = w.cols();
  switch (w.format()) {
    case WeightFormat::kBf16: {
      const uint16_t* row = w.bf16() + n * k_total;
      for (int64_t k = 0; k < k_total; ++k) out[k] = Bf16ToFloat(row[k]);
      break;
    }
    case WeightFormat::kFp8Block128: {
      const uint8_t* row = w.fp8() + n * k_total;
      const float* scale = w.scale() + (n / kFp8BlockSize) * Fp8ScaleCols(k_total);
      for (int64_t k = 0; k < k_total; ++k) out[k] = Fp8E4M3ToFloat(row[k]) * scale[k / kFp8BlockSize];
      break;
    }
    case WeightFormat::kInt4Group32: {
      const int64_t groups = w.groups();
      const uint8_t* row = w.int4() + n * groups * 16;
      const uint16_t* scale = w.int4_scale() + n * groups;
      for (int64_t k = 0; k < k_total; ++k) {
        const int64_t g = k / 32, i = k % 32;
        const uint8_t byte = row[g * 16 + i % 16];
        const int q = static_cast<int>(i < 16 ? (byte & 0xf) : (byte >> 4)) - 8;
        out[k] = static_cast<float>(q) * Bf16ToFloat(scale[g]);
      }
      break;
    }
  }
}

}  // namespace

void GemvRowsPortable(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t n0, int64_t n1) {
  const int64_t k_total = w.cols(), n_total = w.rows();
  std::vector<float> row(static_cast<size_t>(k_total));
  for (int64_t n = n0; n < n1; ++n) {
    DecodeRow(w, n, row.data());
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * k_total;
      float acc = 0.0f;
      for (int64_t k = 0; k < k_total; ++k) acc += row[static_cast<size_t>(k)] * xi[k];
      y[i * n_total + n] = acc;
    }
  }
}

void QuantizeActivations(const float* x, int64_t m, int64_t cols, Int4Activation kind,
                         QuantizedActivations* out) {
  const int64_t groups = (cols + kInt4GroupSize - 1) / kInt4GroupSize;
  const float qmax = kind == Int4Activation::kInt16 ? 32767.0f : 127.0f;
  out->kind = kind;
  out->m = m;
  out->groups = groups;
  const size_t padded = static_cast<size_t>(m * groups * kInt4GroupSize);
  if (kind == Int4Activation::kInt16) {
    out->q16.assign(padded, 0);
  } else {
    out->q8.assign(padded, 0);
  }
  out->scale.resize(static_cast<size_t>(m * groups));
  out->corr.resize(static_cast<size_t>(m * groups));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t k0 = g * kInt4GroupSize, k1 = std::min(cols, k0 + kInt4GroupSize);
      float amax = 0.0f;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(x[i * cols + k]));
      const float scale = amax > 0.0f ? amax / qmax : 1.0f;
      const float inv = 1.0f / scale;
      int32_t sum = 0;
      for (int64_t k = k0; k < k1; ++k) {
        const float q = std::clamp(std::nearbyint(x[i * cols + k] * inv), -qmax, qmax);
        const size_t at = static_cast<size_t>(i * groups * kInt4GroupSize + k);
        if (kind == Int4Activation::kInt16) {
          out->q16[at] = static_cast<int16_t>(q);
        } else {
          out->q8[at] = static_cast<int8_t>(q);
        }
        sum += static_cast<int32_t>(q);
      }
      out->scale[static_cast<size_t>(i * groups + g)] = scale;
      out->corr[static_cast<size_t>(i * groups + g)] = 8.0f * static_cast<float>(sum) * scale;
    }
  }
}

const char* MatmulIsa(const MatmulOptions& options) { return UseAvx2(options) ? "avx2" : "portable"; }

Status Matmul(const PackedWeight& w, const float* x, int64_t m, float* y, ThreadPool* pool,
              const MatmulOptions& options) {
  if (m < 1) return Status::InvalidArgument("matmul: batch m=" + std::to_string(m) + " must be >= 1");
  if (x == nullptr || y == nullptr || pool == nullptr)
    return Status::InvalidArgument("matmul: null argument");
  const int64_t n_total = w.rows();
  if (!UseAvx2(options)) {
    pool->ParallelFor(n_total, kRowGrain,
                      [&](int64_t n0, int64_t n1, int) { GemvRowsPortable(w, x, m, y, n0, n1); });
    return Status::Ok();
  }
#if defined(TANDEM_HAVE_AVX2_KERNELS)
  if (m > options.gemv_max_batch) {
    std::vector<float> packed(
        static_cast<size_t>((m + avx2::kGemmTileM - 1) / avx2::kGemmTileM * avx2::kGemmTileM * w.cols()));
    avx2::PackActivations(x, m, w.cols(), packed.data());
    pool->ParallelFor(n_total, avx2::kGemmRowGrain,
                      [&](int64_t n0, int64_t n1, int) { avx2::GemmRows(w, packed.data(), m, y, n0, n1); });
    return Status::Ok();
  }
  switch (w.format()) {
    case WeightFormat::kBf16:
      pool->ParallelFor(n_total, kRowGrain,
                        [&](int64_t n0, int64_t n1, int) { avx2::GemvBf16(w, x, m, y, n0, n1); });
      break;
    case WeightFormat::kFp8Block128: {
      std::vector<float> x_prescaled(static_cast<size_t>(m * w.cols()));
      for (size_t i = 0; i < x_prescaled.size(); ++i) x_prescaled[i] = x[i] * avx2::kFp8ActivationPrescale;
      pool->ParallelFor(n_total, kRowGrain, [&](int64_t n0, int64_t n1, int) {
        avx2::GemvFp8(w, x_prescaled.data(), m, y, n0, n1);
      });
    } break;
    case WeightFormat::kInt4Group32: {
      QuantizedActivations xq;
      QuantizeActivations(x, m, w.cols(), options.int4_activation, &xq);
      pool->ParallelFor(n_total, kRowGrain,
                        [&](int64_t n0, int64_t n1, int) { avx2::GemvInt4(w, xq, y, n0, n1); });
      break;
    }
  }
#endif
  return Status::Ok();
}

Status MatmulBf16(const PackedWeight& w, const uint16_t* x, int64_t m, float* y, ThreadPool* pool,
                  const MatmulOptions& options) {
  if (m < 1 || x == nullptr) return Status::InvalidArgument("matmul: bad bf16 activations");
  std::vector<float> xf(static_cast<size_t>(m * w.cols()));
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = Bf16ToFloat(x[i]);
  return Matmul(w, xf.data(), m, y, pool, options);
}

}  // namespace tandem::engine::kernels::cpu
