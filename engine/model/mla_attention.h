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
#include "engine/core/thread_pool.h"
#include "engine/kernels/cpu/matmul.h"
#include "engine/kv/page_pool.h"
#include "engine/model/forward_ops.h"
#include "engine/model/forward_types.h"
#include "engine/model/model_weights.h"

namespace tandem::engine::model {

class MlaAttention {
 public:
  // Precomputes kv_b_proj in fp32 for the absorbed form unless it is bf16 (then read in place).
  // REQUIRES: weights and rope outlive the object.
  static StatusOr<MlaAttention> Create(const ModelConfig& config, const LayerWeights& weights, int64_t layer,
                                       const Rope* rope, ThreadPool* pool);

  // h: [T, hidden] the layer's normed input; out: [T, hidden]. Writes the new tokens' latent rows
  // to each segment's pages (FP8 pools calibrate the layer's scale on the first batch). For GLM
  // full layers, runs the DSA indexer and leaves its masks in *index_masks; layers without
  // indexer weights reuse the masks found there (the previous full layer's choice).
  Status Forward(const float* h, int64_t tokens, std::span<const AttnSegment> segs, kv::PagePool* kv,
                 bool use_indexer, std::vector<KeyMask>* index_masks, ThreadPool* pool,
                 const kernels::cpu::MatmulOptions& options, float* out) const;

 private:
  MlaAttention(const ModelConfig& config, const LayerWeights& weights, int64_t layer, const Rope* rope)
      : config_(&config), weights_(&weights), layer_(layer), rope_(rope) {}

  Status WriteLatent(const float* latent, std::span<const AttnSegment> segs, kv::PagePool* kv) const;
  // The context rows [first, first + page_tokens) ∩ [0, ctx) of the segment (one page), decoded
  // to fp32 at lat + first * width.
  Status ReadContextPage(const AttnSegment& seg, const kv::PagePool& kv, int64_t first, float* lat) const;
  // q: [n, H, nope + rope] of the segment; lat: [ctx, kv_lora + rope]; out: [n, H, v].
  Status Expanded(const AttnSegment& seg, const float* q, const std::vector<float>& lat, const KeyMask& mask,
                  ThreadPool* pool, const kernels::cpu::MatmulOptions& options, float* out) const;
  // Per-thread buffers of AbsorbedHeads, reused across calls.
  struct AbsorbedScratch {
    std::vector<float> p, q_cat, o_lat;  // [heads, ctx], [heads, kv_lora + rope] (q_lat | q_rope), [kv_lora]
  };
  // The absorbed form's three stages. pages[k] holds a segment's context rows
  // [k·page_tokens, (k+1)·page_tokens) of this layer as bf16.
  //   QueryLatent: qc [kv_lora + rope] = [W_UKᵀ q_nope | q_rope] of head h from qh (one token's head).
  //   HeadOutput: scores ph [ctx] of new token i and head h (unscaled dots) -> masked, scaled,
  //     softmaxed in place; o [v] = W_UV Σ_j ph[j]·latent_j.
  void QueryLatent(const float* qh, int64_t h, float* qc) const;
  void HeadOutput(const AttnSegment& seg, std::span<const uint16_t* const> pages, int64_t page_tokens,
                  const KeyMask& mask, int64_t i, int64_t h, float* ph, std::vector<float>* o_lat,
                  float* o) const;
  // Heads [h0, h1) of every new token of the segment, absorbed form: out[i, h, :]; the heads share
  // each pass over the rows.
  void AbsorbedHeads(const AttnSegment& seg, const float* q, std::span<const uint16_t* const> pages,
                     int64_t page_tokens, const KeyMask& mask, int64_t h0, int64_t h1,
                     AbsorbedScratch* scratch, float* out) const;

  // Every head of the absorbed segments (indices into segs) in three ParallelFors: queries by
  // head, scores by page (each page read once), outputs by head. attn: [T, H, v]. The same bits as
  // AbsorbedHeads; for batches with fewer segments than threads.
  Status AbsorbedSplit(std::span<const AttnSegment> segs, std::span<const size_t> absorbed, const float* q,
                       std::span<const std::vector<const uint16_t*>> rows16, int64_t page_tokens,
                       const std::vector<KeyMask>& masks, ThreadPool* pool, float* attn) const;

  const ModelConfig* config_;
  const LayerWeights* weights_;
  int64_t layer_;
  const Rope* rope_;
  // kv_b_proj [H * (nope + v), kv_lora] (W_UK and W_UV rows): in place when it is bf16, else
  // decoded to fp32 once.
  const uint16_t* kv_b_bf16_ = nullptr;
  std::vector<float> kv_b_;
};

}  // namespace tandem::engine::model
