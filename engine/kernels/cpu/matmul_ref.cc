// The oracle: no SIMD, no repacking, double accumulation, weights decoded from checkpoint layout.
#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/matmul.h"

namespace tandem::engine::kernels::cpu {
namespace {

template <typename WeightAt>
void RefLoop(int64_t rows, int64_t cols, const float* x, int64_t m, float* y, WeightAt weight_at) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t n = 0; n < rows; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < cols; ++k) acc += static_cast<double>(weight_at(n, k)) * x[i * cols + k];
      y[i * rows + n] = static_cast<float>(acc);
    }
  }
}

}  // namespace

void MatmulRef(const Bf16WeightView& w, const float* x, int64_t m, float* y) {
  RefLoop(w.rows, w.cols, x, m, y, [&](int64_t n, int64_t k) { return Bf16ToFloat(w.data[n * w.cols + k]); });
}

void MatmulRef(const Fp8BlockWeightView& w, const float* x, int64_t m, float* y) {
  const int64_t scale_cols = Fp8ScaleCols(w.cols);
  RefLoop(w.rows, w.cols, x, m, y, [&](int64_t n, int64_t k) {
    return Fp8E4M3ToFloat(w.data[n * w.cols + k]) *
           w.scale_inv[(n / kFp8BlockSize) * scale_cols + k / kFp8BlockSize];
  });
}

void MatmulRef(const Int4GroupWeightView& w, const float* x, int64_t m, float* y) {
  const int64_t packed_cols = Int4PackedCols(w.cols), scale_cols = Int4ScaleCols(w.cols);
  RefLoop(w.rows, w.cols, x, m, y, [&](int64_t n, int64_t k) {
    const uint32_t word = static_cast<uint32_t>(w.packed[n * packed_cols + k / 8]);
    const int q = static_cast<int>((word >> (4 * (k % 8))) & 0xfu) - 8;
    return static_cast<float>(q) * Bf16ToFloat(w.scale[n * scale_cols + k / kInt4GroupSize]);
  });
}

}  // namespace tandem::engine::kernels::cpu
