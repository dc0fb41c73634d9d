#include "engine/kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/kernels/cpu/row_ops.h"
#include "engine/kernels/cpu/vector_ops.h"

namespace tandem::engine::kernels::cpu {

// ---------------------------------------------------------------------------------- CpuBackend

Status CpuBackend::Matmul(const PackedWeight& w, const float* x, int64_t m, float* y) const {
  return cpu::Matmul(w, x, m, y, pool_, options_);
}

Status CpuBackend::MatmulBatch(std::span<const MatmulTask> tasks) const {
  return cpu::MatmulBatch(tasks, pool_, options_);
}

void CpuBackend::MatmulF32(const float* w, int64_t n, int64_t k, const float* x, int64_t m, float* y) const {
  // Every (row of x, row of w) dot product of the step in one job: a router is a few hundred rows,
  // too few to wake the pool for once per token.
  pool_->ParallelFor(m * n, 16, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) y[i] = DotF32(x + (i / n) * k, w + (i % n) * k, k);
  });
}

void CpuBackend::DecodeWeightRow(const PackedWeight& w, int64_t row, float* out) const {
  cpu::DecodeWeightRow(w, row, out, options_);
}

void CpuBackend::GatherRows(const float* table, int64_t dim, const int32_t* ids, int64_t n,
                            float* out) const {
  for (int64_t i = 0; i < n; ++i) std::copy_n(table + static_cast<int64_t>(ids[i]) * dim, dim, out + i * dim);
}

void CpuBackend::RmsNormRows(float* x, int64_t rows, int64_t dim, int64_t stride, const float* weight,
                             double eps) const {
  cpu::RmsNormRows(x, rows, dim, stride, weight, eps);
}

void CpuBackend::LayerNormRows(float* x, int64_t rows, int64_t dim, const float* weight, const float* bias,
                               double eps) const {
  cpu::LayerNormRows(x, rows, dim, weight, bias, eps);
}

void CpuBackend::SiluMul(float* gate, const float* up, int64_t n) const { cpu::SiluMul(gate, up, n); }

void CpuBackend::RopeRows(const RopeTable& rope, float* x, int64_t rows, int64_t row_stride, int64_t count,
                          int64_t stride, const int64_t* positions) const {
  for (int64_t r = 0; r < rows; ++r) ApplyRope(rope, x + r * row_stride, count, stride, positions[r]);
}

void CpuBackend::AddScaled(float a, const float* x, float* y, int64_t n) const { AddScaledF32(a, x, y, n); }

float CpuBackend::Dot(const float* a, const float* b, int64_t n) const { return DotF32(a, b, n); }

void CpuBackend::WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim,
                                float* out) const {
  cpu::WeightedRowSum(w, rows, n, stride, dim, out);
}

void CpuBackend::AttentionScores(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n,
                                 int64_t width, float* out, int64_t out_stride) const {
  cpu::AttentionScores(q, nq, q_stride, rows, n, width, out, out_stride);
}

void CpuBackend::AttentionWeightedSums(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n,
                                       int64_t dim, float* out, int64_t out_stride) const {
  cpu::AttentionWeightedSums(w, nw, w_stride, rows, n, dim, out, out_stride);
}

void CpuBackend::RowsToF32(RowsRef rows, int64_t n, int64_t width, float scale, float* out) const {
  cpu::RowsToF32(rows, n, width, scale, out);
}

void CpuBackend::MlaDecode(std::span<const MlaQuery> queries, const MlaDecodeShape& shape, float* out) const {
  cpu::MlaDecode(queries, shape, pool_, out);
}

void CpuBackend::MlaDecodeHeads(const MlaQuery& query, int64_t nh, const MlaDecodeShape& shape,
                                float* out) const {
  cpu::MlaDecodeHeads(query, nh, shape, out);
}

void CpuBackend::MlaPrefill(const MlaPrefillInput& in, const MlaPrefillShape& shape, float* out) const {
  cpu::MlaPrefill(in, shape, pool_, out);
}

// ---------------------------------------------------------------------------------- RefBackend

namespace {

// The exact dequantization of a weight's rows (DecodeWeightRow on the portable path: each value
// times its scale, rounded once, as the Dequantize*Ref oracles give).
void ExactRow(const PackedWeight& w, int64_t row, float* out) {
  MatmulOptions portable;
  portable.force_portable = true;
  cpu::DecodeWeightRow(w, row, out, portable);
}

}  // namespace

Status RefBackend::Matmul(const PackedWeight& w, const float* x, int64_t m, float* y) const {
  if (m < 1) return Status::InvalidArgument("matmul: batch m=" + std::to_string(m) + " must be >= 1");
  if (x == nullptr || y == nullptr) return Status::InvalidArgument("matmul: null argument");
  const int64_t n = w.rows(), k = w.cols();
  std::vector<float> row(k);
  for (int64_t r = 0; r < n; ++r) {
    ExactRow(w, r, row.data());
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += static_cast<double>(x[i * k + j]) * row[j];
      y[i * n + r] = static_cast<float>(sum);
    }
  }
  return Status::Ok();
}

void RefBackend::MatmulF32(const float* w, int64_t n, int64_t k, const float* x, int64_t m, float* y) const {
  for (int64_t i = 0; i < m * n; ++i) y[i] = DotF32Ref(x + (i / n) * k, w + (i % n) * k, k);
}

void RefBackend::DecodeWeightRow(const PackedWeight& w, int64_t row, float* out) const {
  ExactRow(w, row, out);
}

void RefBackend::GatherRows(const float* table, int64_t dim, const int32_t* ids, int64_t n,
                            float* out) const {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t d = 0; d < dim; ++d) out[i * dim + d] = table[static_cast<int64_t>(ids[i]) * dim + d];
  }
}

void RefBackend::RmsNormRows(float* x, int64_t rows, int64_t dim, int64_t stride, const float* weight,
                             double eps) const {
  cpu::RmsNormRows(x, rows, dim, stride, weight, eps);  // sums in double: its own oracle
}

void RefBackend::LayerNormRows(float* x, int64_t rows, int64_t dim, const float* weight, const float* bias,
                               double eps) const {
  cpu::LayerNormRows(x, rows, dim, weight, bias, eps);  // likewise
}

void RefBackend::SiluMul(float* gate, const float* up, int64_t n) const { SiluMulRef(gate, up, n); }

void RefBackend::RopeRows(const RopeTable& rope, float* x, int64_t rows, int64_t row_stride, int64_t count,
                          int64_t stride, const int64_t* positions) const {
  // rotates in double, rounded once: its own oracle
  for (int64_t r = 0; r < rows; ++r) ApplyRope(rope, x + r * row_stride, count, stride, positions[r]);
}

void RefBackend::AddScaled(float a, const float* x, float* y, int64_t n) const {
  AddScaledF32Ref(a, x, y, n);
}

float RefBackend::Dot(const float* a, const float* b, int64_t n) const { return DotF32Ref(a, b, n); }

void RefBackend::WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim,
                                float* out) const {
  WeightedRowSumRef(w, rows, n, stride, dim, out);
}

void RefBackend::AttentionScores(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n,
                                 int64_t width, float* out, int64_t out_stride) const {
  AttentionScoresRef(q, nq, q_stride, rows, n, width, out, out_stride);
}

void RefBackend::AttentionWeightedSums(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n,
                                       int64_t dim, float* out, int64_t out_stride) const {
  AttentionWeightedSumsRef(w, nw, w_stride, rows, n, dim, out, out_stride);
}

void RefBackend::RowsToF32(RowsRef rows, int64_t n, int64_t width, float scale, float* out) const {
  if (rows.format == RowFormat::kBf16) scale = 1.0f;  // bf16 rows are widened as they are
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t d = 0; d < width; ++d)
      out[j * width + d] = static_cast<float>(static_cast<double>(RowValue(rows, j, d)) * scale);
  }
}

void RefBackend::MlaDecode(std::span<const MlaQuery> queries, const MlaDecodeShape& shape, float* out) const {
  MlaDecodeRef(queries, shape, out);
}

void RefBackend::MlaDecodeHeads(const MlaQuery& query, int64_t nh, const MlaDecodeShape& shape,
                                float* out) const {
  MlaDecodeShape heads = shape;
  heads.heads = nh;
  MlaDecodeRef(std::span<const MlaQuery>(&query, 1), heads, out);
}

void RefBackend::MlaPrefill(const MlaPrefillInput& in, const MlaPrefillShape& shape, float* out) const {
  MlaPrefillRef(in, shape, out);
}

}  // namespace tandem::engine::kernels::cpu
