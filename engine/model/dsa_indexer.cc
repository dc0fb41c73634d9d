#include "engine/model/dsa_indexer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/model/forward_ops.h"

namespace tandem::engine::model {

namespace {

// Runs [first, first + n) of a segment's positions page by page: fn(page, slot, offset, count).
template <typename Fn>
Status ForEachPageRun(const AttnSegment& seg, int64_t page_tokens, int64_t first, int64_t n, Fn fn) {
  for (int64_t i = 0; i < n;) {
    const int64_t pos = first + i;
    const int64_t run = std::min(n - i, page_tokens - pos % page_tokens);
    RETURN_IF_ERROR(fn(seg.seq->pages[pos / page_tokens], static_cast<size_t>(pos % page_tokens), i, run));
    i += run;
  }
  return Status::Ok();
}

}  // namespace

Status DsaIndexerSelect(const ModelConfig& config, const DsaIndexerWeights& w, const Rope& rope,
                        int64_t layer, const float* h, const float* q_resid, int64_t tokens,
                        std::span<const AttnSegment> segs, kv::PagePool* kv, const kernels::Backend& be,
                        std::vector<KeyMask>* masks, Communicator* comm) {
  const int64_t heads = config.indexer.n_heads;
  const int64_t dim = config.indexer.head_dim;
  const int64_t topk = config.indexer.topk;
  std::vector<float> q(tokens * heads * dim), k(tokens * dim), head_w(tokens * heads);
  RETURN_IF_ERROR(be.Matmul(w.wq_b, q_resid, tokens, q.data()));         // [T, H, d]
  RETURN_IF_ERROR(be.Matmul(w.wk, h, tokens, k.data()));                 // [T, d]
  RETURN_IF_ERROR(be.Matmul(w.weights_proj, h, tokens, head_w.data()));  // [T, H]
  be.LayerNormRows(k.data(), tokens, dim, w.k_norm_weight.data(), w.k_norm_bias.data(), 1e-6);
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(dim));
  const double inv_sqrt_h = 1.0 / std::sqrt(static_cast<double>(heads));

  const int64_t page_tokens = static_cast<int64_t>(kv->page_tokens());
  const size_t l = static_cast<size_t>(layer);
  masks->assign(segs.size(), KeyMask());
  // Every segment's new keys first (rank 0 only under tensor parallelism), then the reads.
  Status written = Status::Ok();
  const std::vector<int64_t> positions = Positions(segs, tokens);
  be.RopeRows(rope.table(), q.data(), tokens, heads * dim, heads, dim, positions.data());
  be.RopeRows(rope.table(), k.data(), tokens, dim, 1, dim, positions.data());
  for (const AttnSegment& seg : segs) {
    if (!written.ok() || (comm != nullptr && comm->rank() != 0)) continue;
    written = ForEachPageRun(seg, page_tokens, seg.past, seg.num_new,
                             [&](kv::PageId page, size_t slot, int64_t i, int64_t n) {
                               const float* src = k.data() + (seg.first_row + i) * dim;
                               return kv->WriteIndexKeys(page, l, slot, {src, static_cast<size_t>(n * dim)});
                             });
  }
  RETURN_IF_ERROR(AgreeAcrossRanks(comm, written));
  std::vector<float> keys;  // [context, d]: the segment's keys as the pages hold them
  for (size_t s = 0; s < segs.size(); ++s) {
    const AttnSegment& seg = segs[s];
    const int64_t ctx = seg.context();
    if (ctx <= topk) continue;  // every query of this segment sees at most top-k keys: dense
    keys.resize(ctx * dim);
    RETURN_IF_ERROR(
        ForEachPageRun(seg, page_tokens, 0, ctx, [&](kv::PageId page, size_t slot, int64_t t, int64_t n) {
          return kv->ReadIndexKeys(page, l, slot, {keys.data() + t * dim, static_cast<size_t>(n * dim)});
        }));
    KeyMask& mask = (*masks)[s];
    mask.assign(seg.num_new * ctx, 0);
    std::vector<double> score;
    std::vector<int64_t> order;
    for (int64_t i = 0; i < seg.num_new; ++i) {
      const int64_t row = seg.first_row + i;
      const int64_t visible = seg.past + i + 1;  // causal keys of this query
      uint8_t* allowed = mask.data() + i * ctx;
      if (visible <= topk) {
        std::fill(allowed, allowed + visible, 1);
        continue;
      }
      score.assign(visible, 0.0);
      for (int64_t hd = 0; hd < heads; ++hd) {
        const float* qh = q.data() + (row * heads + hd) * dim;
        const double wh = head_w[row * heads + hd] * inv_sqrt_h;
        for (int64_t t = 0; t < visible; ++t) {
          const float* kt = keys.data() + t * dim;
          double dot = 0;
          for (int64_t d = 0; d < dim; ++d) dot += static_cast<double>(qh[d]) * kt[d];
          score[t] += wh * std::max(dot * inv_sqrt_d, 0.0);
        }
      }
      order.resize(visible);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
      for (int64_t j = 0; j < topk; ++j) allowed[order[j]] = 1;
    }
  }
  return Status::Ok();
}

}  // namespace tandem::engine::model
