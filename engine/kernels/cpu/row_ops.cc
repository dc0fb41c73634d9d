#include "engine/kernels/cpu/row_ops.h"

#include <cmath>
#include <vector>

#include "engine/kernels/cpu/vector_ops.h"

namespace tandem::engine::kernels::cpu {

void RmsNormRows(float* x, int64_t rows, int64_t dim, int64_t stride, const float* weight, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * stride;
    double sum_sq = 0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(row[i]) * row[i];
    const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) row[i] = static_cast<float>(row[i] * inv * weight[i]);
  }
}

void LayerNormRows(float* x, int64_t rows, int64_t dim, const float* weight, const float* bias, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * dim;
    double mean = 0;
    for (int64_t i = 0; i < dim; ++i) mean += row[i];
    mean /= static_cast<double>(dim);
    double var = 0;
    for (int64_t i = 0; i < dim; ++i) var += (row[i] - mean) * (row[i] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i)
      row[i] = static_cast<float>((row[i] - mean) * inv * weight[i] + bias[i]);
  }
}

void ApplyRope(const RopeTable& table, float* x, int64_t count, int64_t stride, int64_t pos) {
  const int64_t half = table.dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * table.inv_freq[i];
    const double c = std::cos(angle) * table.attention_factor;
    const double s = std::sin(angle) * table.attention_factor;
    const int64_t a = table.interleave ? 2 * i : i;
    const int64_t b = table.interleave ? 2 * i + 1 : i + half;
    for (int64_t j = 0; j < count; ++j) {
      float* v = x + j * stride;
      const double x0 = v[a], x1 = v[b];
      v[a] = static_cast<float>(x0 * c - x1 * s);
      v[b] = static_cast<float>(x1 * c + x0 * s);
    }
  }
}

void SiluMul(float* gate, const float* up, int64_t n) {
  thread_local std::vector<float> e;  // e^-g, in one vectorized pass
  e.resize(n);
  for (int64_t i = 0; i < n; ++i) e[i] = -gate[i];
  ExpF32(e.data(), e.data(), n);
  for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + e[i]) * up[i];
}

void SiluMulRef(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    gate[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

}  // namespace tandem::engine::kernels::cpu
