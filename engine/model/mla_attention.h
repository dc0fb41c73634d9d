#pragma once
// Multi-head latent attention (DeepSeek-V3 / GLM) of one layer over the paged latent KV cache.
//
// Per token: q = q_b(RMSNorm(q_a(x))) (or q_proj(x)) -> [H, nope + rope], RoPE on the rope part;
// latent = kv_a_proj_with_mqa(x) -> [kv_lora | rope]: RMSNorm on the first kv_lora values (the
// compressed KV c), RoPE on the rest (the key part k_r shared by all heads). Only the latent row
// ([kv_lora + rope] = 576 values in the real models) is cached, in the PagePool's dtype.
// Attention reads the whole context's latent rows back from the pages (new tokens included, so
// prefill, chunked prefill and decode all see the cache's rounding) and runs in one of two forms:
//   expanded: k_nope, v = kv_b_proj(c) per head [ctx, H, nope + v]; s = q_nope·k_nope + q_pe·k_r;
//   absorbed: q_lat = W_UKᵀ q_nope [H, kv_lora]; s = q_lat·c + q_pe·k_r; o = W_UV (Σ p c).
// Softmax scale: qk_head_dim^-0.5 · mscale(factor, mscale_all_dim)^2.

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/core/communicator.h"
#include "engine/core/thread_pool.h"
#include "engine/kernels/backend.h"
#include "engine/kv/page_pool.h"
#include "engine/model/forward_ops.h"
#include "engine/model/forward_types.h"
#include "engine/model/model_weights.h"

namespace tandem::engine::model {

class MlaAttention {
 public:
  // Precomputes kv_b_proj in fp32 for the absorbed form when it is int4 (bf16 and fp8 are read in
  // place).
  // REQUIRES: weights and rope outlive the object.
  static StatusOr<MlaAttention> Create(const ModelConfig& config, const LayerWeights& weights, int64_t layer,
                                       const Rope* rope, ThreadPool* pool);

  // h: [T, hidden] the layer's normed input; out: [T, hidden]. Writes the new tokens' latent rows
  // to each segment's pages (FP8 pools calibrate the layer's scale on the first batch). For GLM
  // full layers, runs the DSA indexer and leaves its masks in *index_masks; layers without
  // indexer weights reuse the masks found there (the previous full layer's choice).
  // Tensor parallelism (comm non-null): the ranks share `kv`; rank 0 writes the rows (every rank
  // computes the same ones) and the ranks agree (AgreeAcrossRanks) before any reads them.
  Status Forward(const float* h, int64_t tokens, std::span<const AttnSegment> segs, kv::PagePool* kv,
                 bool use_indexer, std::vector<KeyMask>* index_masks, ThreadPool* pool,
                 const kernels::Backend& be, float* out, Communicator* comm = nullptr) const;

 private:
  MlaAttention(const ModelConfig& config, const LayerWeights& weights, int64_t layer, const Rope* rope)
      : config_(&config), weights_(&weights), layer_(layer), rope_(rope) {}

  // A segment's context rows of this layer, read in place from its pages (bf16 bits or e4m3
  // codes): page k holds rows [k·page_tokens, (k+1)·page_tokens). FP8 rows are read without their
  // per-layer scale, which the absorbed form folds into the softmax scale and the output.
  struct ContextRows {
    std::vector<const uint8_t*> pages;
    kernels::cpu::RowFormat format = kernels::cpu::RowFormat::kBf16;
    int64_t page_tokens = 0;
    int64_t width = 0;
    // The kernels' view (valid while `pages` is unchanged).
    kernels::cpu::PagedRows Paged() const { return {pages.data(), format, page_tokens, width}; }
    // Rows from `row` to the end of its page.
    kernels::cpu::RowsRef At(int64_t row) const { return Paged().At(row); }
  };

  // The steps of Forward. Project: q [T, H, nope + rope] and latent [T, kv_lora + rope] from h
  // (q_resid [T, q_lora] kept for the indexer), normed and with RoPE applied.
  Status Project(const float* h, int64_t tokens, std::span<const AttnSegment> segs,
                 const kernels::Backend& be, std::vector<float>* q, std::vector<float>* q_resid,
                 std::vector<float>* latent) const;
  Status WriteLatent(const float* latent, std::span<const AttnSegment> segs, kv::PagePool* kv) const;
  // Every segment's context rows, in place.
  Status GatherContexts(std::span<const AttnSegment> segs, const kv::PagePool& kv,
                        std::vector<ContextRows>* rows) const;
  // The expanded segments (prefill): their contexts decoded to fp32 (value · scale, rounded once)
  // in one ParallelFor over pages, then Expanded. attn: [T, H, v].
  Status AttendExpanded(std::span<const AttnSegment> segs, const float* q, std::span<const ContextRows> rows,
                        float kv_scale, const std::vector<KeyMask>& masks, ThreadPool* pool,
                        const kernels::Backend& be, float* attn) const;
  // The absorbed segments (decode), by the split or the per-head path (the same bits).
  Status AttendAbsorbed(std::span<const AttnSegment> segs, const float* q, std::span<const ContextRows> rows,
                        float kv_scale, const std::vector<KeyMask>& masks, ThreadPool* pool,
                        const kernels::Backend& be, float* attn) const;
  // q: [n, H, nope + rope] of the segment; lat: [ctx, kv_lora + rope]; out: [n, H, v]. The
  // context's keys and values from kv_b_proj, then the attention by
  // engine/kernels/cpu/mla_prefill.h.
  Status Expanded(const AttnSegment& seg, const float* q, const std::vector<float>& lat, const KeyMask& mask,
                  const kernels::Backend& be, float* out) const;
  // The absorbed form (decode): q_cat = [W_UKᵀ q_nope | q_rope] per head (QueryLatent), the paged
  // attention over the context's latent rows by engine/kernels/cpu/mla_decode.h (flash-decoding
  // blocks sized from the context alone, so the bits never depend on the batch, the threads or
  // the page size), then W_UV on its latent output (OutputFromLatent).
  // The split (AbsorbedSplit, kernels::cpu::MlaDecode) keeps every block partial of its segments
  // at once; above this many floats (32 MB: e.g. 7 Kimi K2.x sequences of 32 blocks) the batch
  // takes the per-head path, which gives the same bits.
  static constexpr int64_t kMaxSplitFloats = int64_t{8} << 20;
  // Per-thread buffers of the per-head path, reused across calls.
  struct AbsorbedScratch {
    std::vector<float> q_cat;  // [heads, kv_lora + rope]: (q_lat | q_rope) per head
    std::vector<float> o_lat;  // [heads, kv_lora]: the paged attention's output per head
  };
  //   QueryLatent: qc [kv_lora + rope] = [W_UKᵀ q_nope | q_rope] of head h from qh (one token's head).
  //   OutputFromLatent: o [v] = W_UV o_lat of head h.
  //   DecodeShape: the kernel's shape; kv_scale (the pool's per-layer scale, 1 for BF16) is folded
  //     into the scores' scale and into the output.
  //   Query: new token i of the segment as a kernel query (its causal rows, its DSA mask row).
  void QueryLatent(const kernels::Backend& be, const float* qh, int64_t h, float* qc) const;
  void OutputFromLatent(const kernels::Backend& be, const float* o_lat, int64_t h, float* o) const;
  kernels::cpu::MlaDecodeShape DecodeShape(float kv_scale) const;
  static kernels::cpu::MlaQuery Query(const AttnSegment& seg, const ContextRows& rows, const KeyMask& mask,
                                      int64_t i, const float* q_cat);
  // Heads [h0, h1) of every new token of the segment, absorbed form: out[i, h, :]; the heads share
  // each pass over the rows.
  void AbsorbedHeads(const kernels::Backend& be, const AttnSegment& seg, const float* q,
                     const ContextRows& rows, float kv_scale, const KeyMask& mask, int64_t h0, int64_t h1,
                     AbsorbedScratch* scratch, float* out) const;

  // Every head of the absorbed segments (indices into segs): queries by head, the paged attention
  // (kernels::cpu::MlaDecode: block partials of all heads by block, each row read once; folds by
  // head), W_UV by head. attn: [T, H, v]. The same bits as AbsorbedHeads; for batches with fewer
  // segments than threads.
  Status AbsorbedSplit(std::span<const AttnSegment> segs, std::span<const size_t> absorbed, const float* q,
                       std::span<const ContextRows> rows, float kv_scale, const std::vector<KeyMask>& masks,
                       ThreadPool* pool, const kernels::Backend& be, float* attn) const;

  const ModelConfig* config_;
  const LayerWeights* weights_;
  int64_t layer_;
  const Rope* rope_;
  // kv_b_proj [H * (nope + v), kv_lora] (W_UK and W_UV rows): in place when it is bf16 or fp8 (fp8
  // rows through DecodeWeightRow: the bits of a dequantized copy), else (int4) decoded to fp32
  // once. An fp32 copy would be 4x an fp8 weight's bytes, read at every decode step: 2 GB more
  // memory for Kimi K2.x's 61 layers.
  const uint16_t* kv_b_bf16_ = nullptr;
  const kernels::cpu::PackedWeight* kv_b_fp8_ = nullptr;
  std::vector<float> kv_b_;
};

}  // namespace tandem::engine::model
