#pragma once
// GLM's DeepSeek Sparse Attention indexer: picks, for each query, the index_topk keys its MLA
// attention may read. score(q, t) = Σ_h w_h · relu(q_h · k_t / sqrt(d)), w = weights_proj(x) /
// sqrt(H); q_h = wq_b(q_resid) [H, d], k_t = LayerNorm(wk(x_t)) [d] shared by the heads, RoPE on
// the first qk_rope_head_dim values of both. A context of at most index_topk keys is attended
// densely (no mask).

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/core/communicator.h"
#include "engine/kernels/backend.h"
#include "engine/kv/page_pool.h"
#include "engine/model/forward_ops.h"
#include "engine/model/forward_types.h"
#include "engine/model/model_weights.h"

namespace tandem::engine::model {

// Writes the new tokens' indexer keys into `layer`'s indexer rows of each segment's pages
// (kv->WriteIndexKeys, the pool's dtype) and writes each segment's mask (masks->at(i); empty when
// every query's context is within index_topk, else [num_new, context] with causal keys outside the
// top-k cleared). Scores read the context's keys back from the pages, new ones included, so a
// prefix-cache hit, chunked prefill and decode all see the cache's rounding.
// h: [T, hidden] the layer's normed input; q_resid: [T, q_lora] the q_a_layernorm output.
// REQUIRES: kv's shape has indexer rows of index_head_dim on `layer` (ModelRunner::Create checks).
// The Linears and the key norm run on `be`; RoPE and the scores on the host.
// comm: tensor parallelism over one shared pool, as MlaAttention::Forward (rank 0 writes the keys).
Status DsaIndexerSelect(const ModelConfig& config, const DsaIndexerWeights& w, const Rope& rope,
                        int64_t layer, const float* h, const float* q_resid, int64_t tokens,
                        std::span<const AttnSegment> segs, kv::PagePool* kv, const kernels::Backend& be,
                        std::vector<KeyMask>* masks, Communicator* comm = nullptr);

}  // namespace tandem::engine::model
