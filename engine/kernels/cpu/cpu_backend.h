#pragma once
// The two CPU implementations of kernels::Backend (engine/kernels/backend.h).
//
// CpuBackend: the kernels of this folder (AVX-512 / AVX2 / portable, picked per call under the
// TANDEM_ISA ceiling), parallel over a ThreadPool, with the Linears' MatmulOptions.
// RefBackend: every op from its scalar oracle (MatmulRef's double sums over exactly dequantized
// rows, DotF32Ref, MlaDecodeRef, MlaPrefillRef, ...), on the calling thread: slow, for tests that
// hold a whole forward pass to the oracles (engine/model/backend_parity_test.cc).

#include "engine/core/thread_pool.h"
#include "engine/kernels/backend.h"
#include "engine/kernels/cpu/matmul.h"

namespace tandem::engine::kernels::cpu {

class CpuBackend final : public Backend {
 public:
  // REQUIRES: pool outlives the backend.
  explicit CpuBackend(ThreadPool* pool, const MatmulOptions& options = {}) : pool_(pool), options_(options) {}

  const char* name() const override { return "cpu"; }
  ThreadPool* pool() const { return pool_; }
  const MatmulOptions& matmul_options() const { return options_; }

  Status Matmul(const PackedWeight& w, const float* x, int64_t m, float* y) const override;
  Status MatmulBatch(std::span<const MatmulTask> tasks) const override;
  void MatmulF32(const float* w, int64_t n, int64_t k, const float* x, int64_t m, float* y) const override;
  void MoeRoute(const MoeRouting& r, const float* logits, int64_t tokens, const float* bias, int32_t* experts,
                float* gates) const override {
    cpu::MoeRoute(r, logits, tokens, bias, experts, gates);  // double scores: its own oracle
  }
  void DecodeWeightRow(const PackedWeight& w, int64_t row, float* out) const override;
  void GatherRows(const float* table, int64_t dim, const int32_t* ids, int64_t n, float* out) const override;
  void RmsNormRows(float* x, int64_t rows, int64_t dim, int64_t stride, const float* weight,
                   double eps) const override;
  void LayerNormRows(float* x, int64_t rows, int64_t dim, const float* weight, const float* bias,
                     double eps) const override;
  void SiluMul(float* gate, const float* up, int64_t n) const override;
  void RopeRows(const RopeTable& rope, float* x, int64_t rows, int64_t row_stride, int64_t count,
                int64_t stride, const int64_t* positions) const override;
  void AddScaled(float a, const float* x, float* y, int64_t n) const override;
  float Dot(const float* a, const float* b, int64_t n) const override;
  void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim,
                      float* out) const override;
  void AttentionScores(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n, int64_t width,
                       float* out, int64_t out_stride) const override;
  void AttentionWeightedSums(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n,
                             int64_t dim, float* out, int64_t out_stride) const override;
  void RowsToF32(RowsRef rows, int64_t n, int64_t width, float scale, float* out) const override;
  void MlaDecode(std::span<const MlaQuery> queries, const MlaDecodeShape& shape, float* out) const override;
  void MlaDecodeHeads(const MlaQuery& query, int64_t nh, const MlaDecodeShape& shape,
                      float* out) const override;
  void MlaPrefill(const MlaPrefillInput& in, const MlaPrefillShape& shape, float* out) const override;

 private:
  ThreadPool* pool_;
  MatmulOptions options_;
};

class RefBackend final : public Backend {
 public:
  const char* name() const override { return "ref"; }

  Status Matmul(const PackedWeight& w, const float* x, int64_t m, float* y) const override;
  void MatmulF32(const float* w, int64_t n, int64_t k, const float* x, int64_t m, float* y) const override;
  void MoeRoute(const MoeRouting& r, const float* logits, int64_t tokens, const float* bias, int32_t* experts,
                float* gates) const override {
    cpu::MoeRoute(r, logits, tokens, bias, experts, gates);  // double scores: its own oracle
  }
  void DecodeWeightRow(const PackedWeight& w, int64_t row, float* out) const override;
  void GatherRows(const float* table, int64_t dim, const int32_t* ids, int64_t n, float* out) const override;
  void RmsNormRows(float* x, int64_t rows, int64_t dim, int64_t stride, const float* weight,
                   double eps) const override;
  void LayerNormRows(float* x, int64_t rows, int64_t dim, const float* weight, const float* bias,
                     double eps) const override;
  void SiluMul(float* gate, const float* up, int64_t n) const override;
  void RopeRows(const RopeTable& rope, float* x, int64_t rows, int64_t row_stride, int64_t count,
                int64_t stride, const int64_t* positions) const override;
  void AddScaled(float a, const float* x, float* y, int64_t n) const override;
  float Dot(const float* a, const float* b, int64_t n) const override;
  void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim,
                      float* out) const override;
  void AttentionScores(const float* q, int64_t nq, int64_t q_stride, RowsRef rows, int64_t n, int64_t width,
                       float* out, int64_t out_stride) const override;
  void AttentionWeightedSums(const float* w, int64_t nw, int64_t w_stride, RowsRef rows, int64_t n,
                             int64_t dim, float* out, int64_t out_stride) const override;
  void RowsToF32(RowsRef rows, int64_t n, int64_t width, float scale, float* out) const override;
  void MlaDecode(std::span<const MlaQuery> queries, const MlaDecodeShape& shape, float* out) const override;
  void MlaDecodeHeads(const MlaQuery& query, int64_t nh, const MlaDecodeShape& shape,
                      float* out) const override;
  void MlaPrefill(const MlaPrefillInput& in, const MlaPrefillShape& shape, float* out) const override;
};

}  // namespace tandem::engine::kernels::cpu
