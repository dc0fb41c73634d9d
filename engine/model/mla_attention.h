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
#include "engine/kernels/cpu/attention.h"
#include "engine/kernels/cpu/matmul.h"
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
                 const kernels::cpu::MatmulOptions& options, float* out, Communicator* comm = nullptr) const;

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
    // Rows from `row` to the end of its page.
    kernels::cpu::RowsRef At(int64_t row) const {
      const int64_t bytes = format == kernels::cpu::RowFormat::kBf16 ? 2 : 1;
      return {pages[row / page_tokens] + (row % page_tokens) * width * bytes, format, width};
    }
  };

  // The steps of Forward. Project: q [T, H, nope + rope] and latent [T, kv_lora + rope] from h
  // (q_resid [T, q_lora] kept for the indexer), normed and with RoPE applied.
  Status Project(const float* h, int64_t tokens, std::span<const AttnSegment> segs, ThreadPool* pool,
                 const kernels::cpu::MatmulOptions& options, std::vector<float>* q,
                 std::vector<float>* q_resid, std::vector<float>* latent) const;
  Status WriteLatent(const float* latent, std::span<const AttnSegment> segs, kv::PagePool* kv) const;
  // Every segment's context rows, in place.
  Status GatherContexts(std::span<const AttnSegment> segs, const kv::PagePool& kv,
                        std::vector<ContextRows>* rows) const;
  // The expanded segments (prefill): their contexts decoded to fp32 (value · scale, rounded once)
  // in one ParallelFor over pages, then Expanded. attn: [T, H, v].
  Status AttendExpanded(std::span<const AttnSegment> segs, const float* q, std::span<const ContextRows> rows,
                        float kv_scale, const std::vector<KeyMask>& masks, ThreadPool* pool,
                        const kernels::cpu::MatmulOptions& options, float* attn) const;
  // The absorbed segments (decode), by the split or the per-head path (the same bits).
  Status AttendAbsorbed(std::span<const AttnSegment> segs, const float* q, std::span<const ContextRows> rows,
                        float kv_scale, const std::vector<KeyMask>& masks, ThreadPool* pool,
                        float* attn) const;
  // q: [n, H, nope + rope] of the segment; lat: [ctx, kv_lora + rope]; out: [n, H, v].
  Status Expanded(const AttnSegment& seg, const float* q, const std::vector<float>& lat, const KeyMask& mask,
                  ThreadPool* pool, const kernels::cpu::MatmulOptions& options, float* out) const;
  // The absorbed form (decode) runs over blocks of the context, as flash-decoding does: a block
  // is BlockRows consecutive rows (a multiple of kBlockRowMultiple, at most kMaxBlocks blocks per
  // segment, sized from the context length alone so that the bits never depend on the batch, the
  // threads or the page size). For one new token and head, a block's partial is [o | m | l]: m = its
  // largest scaled score, l = Σ e_j and o [kv_lora] = Σ e_j c_j with e_j = exp(s_j - m) over its
  // visible rows (l = 0 when none is). Partials fold in block order into the same shape; the
  // head's output is W_UV (o / l). Up to 32 blocks: at batch 1 the blocks are what the threads
  // share, and a few more blocks than threads balance them (17 blocks of 32 rows at 513 tokens).
  static constexpr int64_t kMaxBlocks = 32;
  // The split (AbsorbedSplit) keeps every block partial of its segments at once; above this many
  // floats (32 MB: e.g. 7 Kimi K2.x sequences of 32 blocks) the batch takes the per-head path,
  // which keeps one block's per thread and gives the same bits.
  static constexpr int64_t kMaxSplitFloats = int64_t{8} << 20;
  static constexpr int64_t kBlockRowMultiple = 16;
  static int64_t BlockRows(int64_t ctx);
  static int64_t Blocks(int64_t ctx);  // blocks of BlockRows(ctx) rows covering ctx
  int64_t PartialSize() const { return config_->kv_lora_rank + 2; }
  // Per-thread buffers of the absorbed form, reused across calls.
  struct AbsorbedScratch {
    std::vector<float> q_cat;  // [heads, kv_lora + rope]: (q_lat | q_rope) per head
    std::vector<float> s;      // [heads, block rows]: a block's scores, then its weights e_j
    std::vector<float> part;   // [heads, PartialSize()]: a block's partials
    std::vector<float> state;  // [heads, PartialSize()]: the partials folded so far
    std::vector<float> o_lat;  // [kv_lora]
  };
  // kv_scale: the pool's per-layer scale (1 for BF16), folded into the scores' scale and into
  // W_UV's input.
  //   QueryLatent: qc [kv_lora + rope] = [W_UKᵀ q_nope | q_rope] of head h from qh (one token's head).
  //   BlockPartials: the partials part[h, :] of nh heads (q_cat [nh, kv_lora + rope]) for new
  //     token i over the block of rows [first, first + block_rows); each row is read once for all
  //     nh heads, and a head's partial is the same whatever nh.
  //   FoldPartial: state = the fold of state (l = 0: nothing yet) and the next block's part.
  //   HeadFromState: o [v] = W_UV (kv_scale · o / l) of head h.
  void QueryLatent(const float* qh, int64_t h, float* qc) const;
  void BlockPartials(const AttnSegment& seg, const ContextRows& rows, float kv_scale, const KeyMask& mask,
                     int64_t i, int64_t first, int64_t block_rows, const float* q_cat, int64_t nh,
                     std::vector<float>* s, float* part) const;
  void FoldPartial(const float* part, float* state) const;
  void HeadFromState(const float* state, float kv_scale, int64_t h, std::vector<float>* o_lat,
                     float* o) const;
  // Heads [h0, h1) of every new token of the segment, absorbed form: out[i, h, :]; the heads share
  // each pass over the rows.
  void AbsorbedHeads(const AttnSegment& seg, const float* q, const ContextRows& rows, float kv_scale,
                     const KeyMask& mask, int64_t h0, int64_t h1, AbsorbedScratch* scratch, float* out) const;

  // Every head of the absorbed segments (indices into segs) in three ParallelFors: queries by
  // head, block partials of all heads by block (each row read once), folds and outputs by head.
  // attn: [T, H, v]. The same bits as AbsorbedHeads; for batches with fewer segments than threads.
  Status AbsorbedSplit(std::span<const AttnSegment> segs, std::span<const size_t> absorbed, const float* q,
                       std::span<const ContextRows> rows, float kv_scale, const std::vector<KeyMask>& masks,
                       ThreadPool* pool, float* attn) const;

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
