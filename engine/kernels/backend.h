#pragma once
// kernels::Backend: the computations the forward pass (engine/model: ModelRunner, MlaAttention,
// MoE, GLM's DSA indexer) runs on activations, weights and KV pages, behind one interface, so the
// model is written once and a backend chooses how each runs (issue 21 item 1):
//   CpuBackend (kernels/cpu/cpu_backend.h)  the SIMD kernels of kernels/cpu over a ThreadPool,
//                                           what serving runs;
//   RefBackend (kernels/cpu/cpu_backend.h)  every op from its scalar oracle (double sums, one
//                                           thread): the whole forward pass from oracles, which
//                                           the model's parity test holds CpuBackend to and a
//                                           device backend will be held to the same way;
//   StagingCudaBackend (kernels/cuda/)      the CUDA kernels where they exist, copying in and out
//                                           per op: a verification path, not a serving one.
// Ops are grouped as a device backend would launch them: Linears in each weight format, MoE
// routing, row-wise norms, activations and RoPE, the two MLA attention cores over the paged latent
// cache (absorbed decode, expanded prefill) and the small vector ops of W_UK / W_UV and the MoE
// combine.
//
// Memory: every pointer here is host memory today (the forward pass's activations are
// std::vectors, the weights PackedWeight, the pages the PagePool's). A device backend needs the
// activations to stay on the device between ops, which the forward pass does not do yet (its MoE
// token grouping, the DSA indexer's scores and the copies between ops run on the host): see
// docs/forward-pass.md, "The Backend seam".
//
// Thread safety: ops are const and may be called from several threads at once (MlaAttention calls
// the per-head ops from its pool's threads); the bits an op gives never depend on which thread.

#include <cstdint>
#include <span>

#include "common/status.h"
#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/matmul_batch.h"
#include "engine/kernels/cpu/mla_decode.h"
#include "engine/kernels/cpu/mla_prefill.h"
#include "engine/kernels/cpu/moe_route.h"
#include "engine/kernels/cpu/row_ops.h"

namespace tandem::engine::kernels {

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "ref".
  virtual const char* name() const = 0;

  // --- Linears: y[m, w.rows()] = x[m, w.cols()] · wᵀ in the weight's own format (bf16, fp8
  // block-128, int4 group-32). Errors: InvalidArgument on m < 1 or a null pointer.
  virtual Status Matmul(const cpu::PackedWeight& w, const float* x, int64_t m, float* y) const = 0;
  // Several Linears of one step (tasks may share x; no y overlaps another or any x). By default each
  // task through Matmul, in order; InvalidArgument on a null weight (later tasks are not run).
  virtual Status MatmulBatch(std::span<const cpu::MatmulTask> tasks) const {
    for (const cpu::MatmulTask& t : tasks) {
      if (t.w == nullptr) return Status::InvalidArgument("matmul batch: null weight");
      RETURN_IF_ERROR(Matmul(*t.w, t.x, t.m, t.y));
    }
    return Status::Ok();
  }
  // y[m, n] = x[m, k] · wᵀ for an fp32 weight w [n, k] (the MoE router). Each y element is one dot
  // product computed the same way whatever m.
  virtual void MatmulF32(const float* w, int64_t n, int64_t k, const float* x, int64_t m, float* y) const = 0;
  // Each token's experts and gates from its router logits (cpu/moe_route.h): experts and gates
  // [tokens, r.top_k]. A discrete choice: every backend must choose as the CPU does.
  virtual void MoeRoute(const cpu::MoeRouting& r, const float* logits, int64_t tokens, const float* bias,
                        int32_t* experts, float* gates) const = 0;
  // Row `row` of w dequantized exactly to fp32 (out: [w.cols()]).
  virtual void DecodeWeightRow(const cpu::PackedWeight& w, int64_t row, float* out) const = 0;

  // --- Rows of an fp32 table: out[i] = table[ids[i]] (the embedding), each row `dim` values.
  virtual void GatherRows(const float* table, int64_t dim, const int32_t* ids, int64_t n,
                          float* out) const = 0;

  // --- Row-wise (cpu/row_ops.h): norms, SwiGLU's activation, RoPE.
  virtual void RmsNormRows(float* x, int64_t rows, int64_t dim, int64_t stride, const float* weight,
                           double eps) const = 0;
  virtual void LayerNormRows(float* x, int64_t rows, int64_t dim, const float* weight, const float* bias,
                             double eps) const = 0;
  virtual void SiluMul(float* gate, const float* up, int64_t n) const = 0;
  // RoPE on `rows` rows, row r at x + r * row_stride holding `count` vectors `stride` apart, each
  // rotated (its first rope.dim values) at position positions[r].
  virtual void RopeRows(const cpu::RopeTable& rope, float* x, int64_t rows, int64_t row_stride, int64_t count,
                        int64_t stride, const int64_t* positions) const = 0;

  // --- Vector ops (cpu/vector_ops.h): y += a·x; a·b; out = Σ_j w[j] · rows[j·stride].
  virtual void AddScaled(float a, const float* x, float* y, int64_t n) const = 0;
  virtual float Dot(const float* a, const float* b, int64_t n) const = 0;
  virtual void WeightedRowSum(const float* w, const float* rows, int64_t n, int64_t stride, int64_t dim,
                              float* out) const = 0;

  // --- Scores / weighted sums against bf16 or e4m3 rows read in place (cpu/attention.h), and rows
  // widened to fp32 (times `scale`).
  virtual void AttentionScores(const float* q, int64_t nq, int64_t q_stride, cpu::RowsRef rows, int64_t n,
                               int64_t width, float* out, int64_t out_stride) const = 0;
  virtual void AttentionWeightedSums(const float* w, int64_t nw, int64_t w_stride, cpu::RowsRef rows,
                                     int64_t n, int64_t dim, float* out, int64_t out_stride) const = 0;
  virtual void RowsToF32(cpu::RowsRef rows, int64_t n, int64_t width, float scale, float* out) const = 0;

  // --- MLA attention cores. Absorbed decode over the paged latent rows (cpu/mla_decode.h): every
  // query at once (out [queries, heads, kv_lora]), or one query's first nh heads on the calling
  // thread. Expanded prefill over per-head keys and values (cpu/mla_prefill.h).
  virtual void MlaDecode(std::span<const cpu::MlaQuery> queries, const cpu::MlaDecodeShape& shape,
                         float* out) const = 0;
  virtual void MlaDecodeHeads(const cpu::MlaQuery& query, int64_t nh, const cpu::MlaDecodeShape& shape,
                              float* out) const = 0;
  virtual void MlaPrefill(const cpu::MlaPrefillInput& in, const cpu::MlaPrefillShape& shape,
                          float* out) const = 0;
};

}  // namespace tandem::engine::kernels
