#pragma once
// Expanded MLA attention on the CPU (issue 21 item 1): the prefill form's attention core, behind
// the kernels like the absorbed decode (mla_decode.h). The caller (model/mla_attention.cc) widens
// a request's cached latent rows and multiplies them by kv_b_proj into per-head keys and values;
// this runs the softmax attention of the new tokens' queries over them:
//   out[i, h] = Σ_j p_j · v[j, h],
//   p = softmax_j(scale · (q_nope[i, h] · k_nope[j, h] + q_rope[i, h] · k_rope[j]))
// over the keys j that query i sees: causal (j <= past + i) and, under GLM's DSA indexer, the
// keys its mask row keeps. k_rope is the latent row's rotary part, one per key, shared by heads.
//
// Flash-attention order: a query's keys go in blocks of kMlaPrefillKeyBlock from key 0, each
// block's scores (one fp32 chain over the nope and rope dimensions, then times scale), maximum and
// exponentials (ExpF32) folded into a running (max, sum, output) in block order. Variants:
// AVX-512, AVX2 and portable register tiles (mla_prefill_tiles.h), chosen by ActiveKernelIsa()
// (TANDEM_ISA lowers it), each chain fused multiply-adds where the ISA has them. Each query's
// result is computed the same way whatever the threads, the other queries of its step, or how its
// prompt was chunked (the blocks are counted from key 0, not from the step's first query): tested
// bit for bit in every variant.

#include <cstdint>

#include "engine/core/thread_pool.h"

namespace tandem::engine::kernels::cpu {

inline constexpr int64_t kMlaPrefillKeyBlock = 64;

struct MlaPrefillShape {
  int64_t heads = 0;
  int64_t nope = 0;    // q_nope / k_nope width per head
  int64_t rope = 0;    // q_rope / k_rope width
  int64_t v = 0;       // value width per head
  float scale = 1.0f;  // softmax scale
};

// One request's part of a step.
struct MlaPrefillInput {
  const float* q = nullptr;       // [num_new, heads, nope + rope]
  const float* kv = nullptr;      // [context, heads, nope + v]: key j of head h, then its value
  const float* k_rope = nullptr;  // key j's rotary part [rope] at k_rope + j · k_rope_stride
  int64_t k_rope_stride = 0;
  int64_t past = 0;               // keys cached before the step; query i is at position past + i
  int64_t num_new = 0;            // queries (new tokens)
  const uint8_t* mask = nullptr;  // null, or [num_new, context] 0/1: keys a query may read (DSA)
  int64_t context() const { return past + num_new; }
};

// out [num_new, heads, v], split over the pool's threads by (head, group of queries). A query
// that sees no key (a mask row of zeros) gets zeros.
void MlaPrefill(const MlaPrefillInput& in, const MlaPrefillShape& shape, ThreadPool* pool, float* out);

// The oracle: exact scores, softmax and weighted sums in double, rounded once.
void MlaPrefillRef(const MlaPrefillInput& in, const MlaPrefillShape& shape, float* out);

}  // namespace tandem::engine::kernels::cpu
