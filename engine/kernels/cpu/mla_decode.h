#pragma once
// Paged MLA decode attention on the CPU (issue 21 item 1): the absorbed form's attention core, the
// part of MLA that reads the KV pages, behind the kernels like its CUDA twin
// (engine/kernels/cuda/mla_decode_cuda.h). Per query (one new token of a request) and head:
//   out[0, kv_lora) = kv_scale · Σ_j p_j · row_j[0, kv_lora),
//   p = softmax_j(score_scale · q_cat · row_j) over the rows the query sees,
// with q_cat = [W_UKᵀ q_nope | q_rope] laid out like a cached row [latent | rope], and the rows
// read in place from the pages (BF16 bits, or FP8 e4m3 codes without the pool's per-layer scale,
// which score_scale and kv_scale carry: attention.h). The caller (model/mla_attention.cc) forms
// q_cat from W_UK and applies W_UV to out.
//
// Flash-decoding: a query's rows split into blocks of MlaBlockRows(context) rows (a multiple of 16,
// at most 32 blocks, from the request's context alone). A block's partial for one head is
// [o | m | l]: m its largest scaled score, l = Σ e_j, o = Σ e_j row_j with e_j = exp(s_j - m) over
// the block's visible rows (l = 0 when none is); partials fold in block order. Every partial and
// fold is computed the same way whatever the batch, the threads, the page size or which entry
// point runs it, so MlaDecode and MlaDecodeHeads give the same bits (tested).

#include <cstdint>
#include <span>

#include "engine/core/thread_pool.h"
#include "engine/kernels/cpu/attention.h"

namespace tandem::engine::kernels::cpu {

// One request's cached rows of one layer, in place: page k holds rows [k·page_tokens,
// (k+1)·page_tokens), the first at pages[k], each `width` elements after the previous one.
struct PagedRows {
  const uint8_t* const* pages = nullptr;
  RowFormat format = RowFormat::kBf16;
  int64_t page_tokens = 0;
  int64_t width = 0;
  // Rows from `row` to the end of its page.
  RowsRef At(int64_t row) const {
    const int64_t bytes = format == RowFormat::kBf16 ? 2 : 1;
    return {pages[row / page_tokens] + (row % page_tokens) * width * bytes, format, width};
  }
};

// One query: a new token of a request.
struct MlaQuery {
  const float* q_cat = nullptr;  // [heads, width]
  PagedRows rows;
  int64_t context = 0;            // the request's rows this step (the block size comes from it)
  int64_t visible = 0;            // the query sees rows [0, visible) (causal), 1 <= visible <= context
  const uint8_t* mask = nullptr;  // null, or [context] 0/1: the rows it may read among those (DSA)
};

struct MlaDecodeShape {
  int64_t heads = 0;
  int64_t kv_lora = 0;       // out's width; rows are PagedRows::width wide (kv_lora + rope)
  float score_scale = 1.0f;  // softmax scale · the pool's per-layer scale (1 for BF16)
  float kv_scale = 1.0f;     // the pool's per-layer scale (1 for BF16), applied to out
};

// Rows per context block, and blocks covering `context` rows.
int64_t MlaBlockRows(int64_t context);
int64_t MlaBlocks(int64_t context);
// Floats of block partials MlaDecode keeps for one query of a request with `context` rows (all
// heads): what a caller sums over its queries to cap the split's memory.
int64_t MlaDecodePartialFloats(int64_t context, const MlaDecodeShape& shape);

// out [queries, heads, kv_lora]: partials of every (query, block) for all heads split over the
// pool's threads (each row read once, for all heads), then the folds of every (query, head). For
// few queries: the work of one query is spread over the threads.
void MlaDecode(std::span<const MlaQuery> queries, const MlaDecodeShape& shape, ThreadPool* pool, float* out);

// One query's first nh heads on the calling thread (q.q_cat [nh, width], out [nh, kv_lora]; the
// heads share each pass over the rows): for callers that split many queries over threads
// themselves. shape.heads is not read.
void MlaDecodeHeads(const MlaQuery& query, int64_t nh, const MlaDecodeShape& shape, float* out);

// The oracle: scores from AttentionScoresRef, softmax and weighted sums of the rows' exact
// values in double, rounded once. A query that sees no row gets zeros.
void MlaDecodeRef(std::span<const MlaQuery> queries, const MlaDecodeShape& shape, float* out);

}  // namespace tandem::engine::kernels::cpu
