#include "engine/kernels/cpu/mla_decode.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/kernels/cpu/vector_ops.h"

namespace tandem::engine::kernels::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Up to 32 blocks: at batch 1 the blocks are what the threads share, and a few more blocks than
// threads balance them (17 blocks of 32 rows at 513 tokens).
constexpr int64_t kMaxBlocks = 32;
constexpr int64_t kBlockRowMultiple = 16;
// FP8 rows are read in place by up to this many heads at once (one group of the attention
// kernels, which decode a row chunk again for every 4 heads); more heads read a bf16 copy of the
// block, widened once (the same bits).
constexpr int64_t kFp8InPlaceMaxHeads = 4;

int64_t PartialSize(const MlaDecodeShape& shape) { return shape.kv_lora + 2; }

// The partials part[h, :] of nh heads (q_cat [nh, width]) over the rows [first, first + block_rows)
// of the query; each row is read once for all nh heads, and a head's partial is the same whatever nh.
void BlockPartials(const float* q_cat, int64_t nh, const MlaQuery& query, const MlaDecodeShape& shape,
                   int64_t first, int64_t block_rows, std::vector<float>* s, float* part) {
  const PagedRows& rows = query.rows;
  const int64_t lora = shape.kv_lora, width = rows.width, psize = PartialSize(shape);
  const int64_t page_tokens = rows.page_tokens;
  const int64_t end = std::min(first + block_rows, query.visible), n = end - first;
  for (int64_t h = 0; h < nh; ++h) {
    float* ph = part + h * psize;
    std::fill(ph, ph + lora, 0.0f);
    ph[lora] = kNegInf;
    ph[lora + 1] = 0.0f;
  }
  if (n <= 0) return;
  // Scores of every head, then their weighted sums, over the block's rows page by page ([p0, p1)
  // within one page; a block may start or end mid-page).
  s->resize(nh * block_rows);
  const bool widen = rows.format == RowFormat::kFp8E4M3 && nh > kFp8InPlaceMaxHeads;
  thread_local std::vector<uint16_t> widened;
  if (widen) {
    widened.resize(n * width);
    for (int64_t p0 = first, p1; p0 < end; p0 = p1) {
      p1 = std::min(end, (p0 / page_tokens + 1) * page_tokens);
      Fp8RowsToBf16(rows.At(p0), p1 - p0, width, widened.data() + (p0 - first) * width);
    }
  }
  auto each_run = [&](auto fn) {
    if (widen) {
      fn(first, end, RowsRef{widened.data(), RowFormat::kBf16, width});
      return;
    }
    for (int64_t p0 = first, p1; p0 < end; p0 = p1) {
      p1 = std::min(end, (p0 / page_tokens + 1) * page_tokens);
      fn(p0, p1, rows.At(p0));
    }
  };
  each_run([&](int64_t p0, int64_t p1, RowsRef run) {
    AttentionScores(q_cat, nh, width, run, p1 - p0, width, s->data() + (p0 - first), block_rows);
  });
  // Per head: masked and scaled scores, their maximum m, the weights e_j = exp(s_j - m) and l.
  for (int64_t h = 0; h < nh; ++h) {
    float* sh = s->data() + h * block_rows;
    float m = kNegInf;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t j = first + r;
      sh[r] = query.mask == nullptr || query.mask[j] != 0 ? sh[r] * shape.score_scale : kNegInf;
      m = std::max(m, sh[r]);
    }
    float l = 0.0f;
    if (m != kNegInf) {
      for (int64_t r = 0; r < n; ++r) sh[r] -= m;  // masked rows stay -inf: their weight is 0
      ExpF32(sh, sh, n);
      for (int64_t r = 0; r < n; ++r) l += sh[r];
    } else {
      std::fill(sh, sh + n, 0.0f);  // every row masked: no weight, and the sums below skip them
    }
    part[h * psize + lora] = m;
    part[h * psize + lora + 1] = l;
  }
  // o = Σ e_j row_j of every head, page by page (the rows just scored, still in cache).
  each_run([&](int64_t p0, int64_t p1, RowsRef run) {
    AttentionWeightedSums(s->data() + (p0 - first), nh, block_rows, run, p1 - p0, lora, part, psize);
  });
}

// state = the fold of state (l = 0: nothing yet) and the next block's partial.
void FoldPartial(const float* part, int64_t lora, float* state) {
  const float pm = part[lora], pl = part[lora + 1];
  if (pl == 0.0f) return;  // nothing visible in the block
  if (state[lora + 1] == 0.0f) {
    std::copy_n(part, lora + 2, state);
    return;
  }
  if (pm > state[lora]) {  // a new maximum: rescale what was folded so far
    const float f = std::exp(state[lora] - pm);
    for (int64_t d = 0; d < lora; ++d) state[d] *= f;
    state[lora + 1] *= f;
    state[lora] = pm;
  }
  const float f = std::exp(pm - state[lora]);
  for (int64_t d = 0; d < lora; ++d) state[d] += f * part[d];
  state[lora + 1] += f * pl;
}

// out [kv_lora] = kv_scale · o / l of a folded state; zeros when no row was visible (l = 0).
void OutputFromState(const float* state, const MlaDecodeShape& shape, float* out) {
  const int64_t lora = shape.kv_lora;
  std::fill(out, out + lora, 0.0f);
  if (state[lora + 1] > 0.0f) {
    const float inv = shape.kv_scale / state[lora + 1];
    for (int64_t d = 0; d < lora; ++d) out[d] = state[d] * inv;
  }
}

}  // namespace

int64_t MlaBlockRows(int64_t context) {
  const int64_t rows = (std::max<int64_t>(context, 1) + kMaxBlocks - 1) / kMaxBlocks;
  return (rows + kBlockRowMultiple - 1) / kBlockRowMultiple * kBlockRowMultiple;
}

int64_t MlaBlocks(int64_t context) { return (context + MlaBlockRows(context) - 1) / MlaBlockRows(context); }

int64_t MlaDecodePartialFloats(int64_t context, const MlaDecodeShape& shape) {
  return MlaBlocks(context) * shape.heads * PartialSize(shape);
}

void MlaDecodeHeads(const MlaQuery& query, int64_t nh, const MlaDecodeShape& shape, float* out) {
  const int64_t psize = PartialSize(shape), lora = shape.kv_lora;
  const int64_t block_rows = MlaBlockRows(query.context);
  thread_local std::vector<float> s, part, state;
  part.resize(nh * psize);
  state.resize(nh * psize);
  for (int64_t h = 0; h < nh; ++h) state[h * psize + lora + 1] = 0.0f;
  for (int64_t first = 0; first < query.visible; first += block_rows) {
    BlockPartials(query.q_cat, nh, query, shape, first, block_rows, &s, part.data());
    for (int64_t h = 0; h < nh; ++h) FoldPartial(part.data() + h * psize, lora, state.data() + h * psize);
  }
  for (int64_t h = 0; h < nh; ++h) OutputFromState(state.data() + h * psize, shape, out + h * lora);
}

void MlaDecode(std::span<const MlaQuery> queries, const MlaDecodeShape& shape, ThreadPool* pool, float* out) {
  const int64_t heads = shape.heads, psize = PartialSize(shape), lora = shape.kv_lora;
  // Partials [blocks, heads, psize] per query, in a buffer this thread keeps between calls, so no
  // layer allocates, zero-fills or page-faults it anew. Every partial the folds read is written
  // first (an empty block writes l = 0).
  thread_local std::vector<float> parts_held;
  std::vector<int64_t> at(queries.size()), blocks(queries.size());
  std::vector<std::array<int64_t, 2>> query_blocks;  // (query, block)
  int64_t floats = 0;
  for (size_t k = 0; k < queries.size(); ++k) {
    blocks[k] = MlaBlocks(queries[k].context);
    at[k] = floats;
    floats += MlaDecodePartialFloats(queries[k].context, shape);
    for (int64_t b = 0; b < blocks[k]; ++b) query_blocks.push_back({static_cast<int64_t>(k), b});
  }
  if (static_cast<int64_t>(parts_held.size()) < floats) parts_held.resize(floats);
  float* parts = parts_held.data();
  // 1. Partials of all heads, the blocks split over the threads: each row is read once.
  pool->ParallelFor(static_cast<int64_t>(query_blocks.size()), 1, [&](int64_t begin, int64_t end, int) {
    std::vector<float> s;
    for (int64_t i = begin; i < end; ++i) {
      const auto [k, b] = query_blocks[i];
      const MlaQuery& q = queries[k];
      const int64_t block_rows = MlaBlockRows(q.context);
      BlockPartials(q.q_cat, heads, q, shape, b * block_rows, block_rows, &s,
                    parts + at[k] + b * heads * psize);
    }
  });
  // 2. Per (query, head): the blocks' partials folded in order, then the output.
  pool->ParallelFor(static_cast<int64_t>(queries.size()) * heads, 1, [&](int64_t begin, int64_t end, int) {
    std::vector<float> state(psize);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t k = i / heads, h = i % heads;
      state[lora + 1] = 0.0f;
      for (int64_t b = 0; b < blocks[k]; ++b)
        FoldPartial(parts + at[k] + (b * heads + h) * psize, lora, state.data());
      OutputFromState(state.data(), shape, out + i * lora);
    }
  });
}

void MlaDecodeRef(std::span<const MlaQuery> queries, const MlaDecodeShape& shape, float* out) {
  const int64_t lora = shape.kv_lora;
  for (size_t k = 0; k < queries.size(); ++k) {
    const MlaQuery& q = queries[k];
    const int64_t width = q.rows.width;
    for (int64_t h = 0; h < shape.heads; ++h) {
      std::vector<double> p(q.visible, 0.0);
      std::vector<bool> seen(q.visible, false);
      double m = -HUGE_VAL;
      for (int64_t j = 0; j < q.visible; ++j) {
        if (q.mask != nullptr && q.mask[j] == 0) continue;
        float dot;
        AttentionScoresRef(q.q_cat + h * width, 1, width, q.rows.At(j), 1, width, &dot, 1);
        p[j] = static_cast<double>(dot) * shape.score_scale;
        seen[j] = true;
        m = std::max(m, p[j]);
      }
      double l = 0;
      for (int64_t j = 0; j < q.visible; ++j) l += p[j] = seen[j] ? std::exp(p[j] - m) : 0.0;
      float* o = out + (static_cast<int64_t>(k) * shape.heads + h) * lora;
      for (int64_t d = 0; d < lora; ++d) {
        double sum = 0;
        for (int64_t j = 0; j < q.visible; ++j) {
          if (p[j] != 0.0) sum += p[j] * RowValue(q.rows.At(j), 0, d);
        }
        o[d] = l > 0 ? static_cast<float>(sum / l * shape.kv_scale) : 0.0f;
      }
    }
  }
}

}  // namespace tandem::engine::kernels::cpu
