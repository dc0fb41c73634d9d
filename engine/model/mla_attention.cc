#include "engine/model/mla_attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/matmul_batch.h"
#include "engine/kernels/cpu/vector_ops.h"
#include "engine/model/dsa_indexer.h"

namespace tandem::engine::model {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Decoded contexts kept between calls per thread (see Forward): 16 MiB of fp32.
constexpr size_t kKeptContextFloats = size_t{4} << 20;
// FP8 context rows are read in place by up to this many heads at once (one group of the kernels').
constexpr int64_t kFp8InPlaceMaxHeads = 4;

// Whether query i of `seg` may read key j: causal, and chosen by the indexer when it masked.
bool Allowed(const AttnSegment& seg, const KeyMask& mask, int64_t i, int64_t j) {
  if (j > seg.past + i) return false;
  return mask.empty() || mask[i * seg.context() + j] != 0;
}

}  // namespace

StatusOr<MlaAttention> MlaAttention::Create(const ModelConfig& config, const LayerWeights& weights,
                                            int64_t layer, const Rope* rope, ThreadPool* pool) {
  MlaAttention a(config, weights, layer, rope);
  // A bf16 or fp8 kv_b_proj is read in place by the absorbed form (bf16 rows widened exactly, fp8
  // rows decoded with their block scales, on the fly); int4 is decoded once to fp32 here, through
  // the Matmul kernel itself (identity · Wᵀ gives Wᵀ), then transposed back to
  // [H * (nope + v), kv_lora].
  if (weights.attn.kv_b_proj.format() == WeightFormat::kBf16) {
    a.kv_b_bf16_ = weights.attn.kv_b_proj.bf16();
    return a;
  }
  if (weights.attn.kv_b_proj.format() == WeightFormat::kFp8Block128) {
    a.kv_b_fp8_ = &weights.attn.kv_b_proj;
    return a;
  }
  const int64_t lora = config.kv_lora_rank;
  const int64_t n = weights.attn.kv_b_proj.rows();
  std::vector<float> eye(lora * lora, 0.0f);
  for (int64_t i = 0; i < lora; ++i) eye[i * lora + i] = 1.0f;
  std::vector<float> transposed(lora * n);
  RETURN_IF_ERROR(kernels::cpu::Matmul(weights.attn.kv_b_proj, eye.data(), lora, transposed.data(), pool));
  a.kv_b_.resize(n * lora);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t cc = 0; cc < lora; ++cc) a.kv_b_[r * lora + cc] = transposed[cc * n + r];
  }
  return a;
}

Status MlaAttention::WriteLatent(const float* latent, std::span<const AttnSegment> segs,
                                 kv::PagePool* kv) const {
  const int64_t width = config_->KvLatentWidth();
  const int64_t page_tokens = static_cast<int64_t>(kv->page_tokens());
  int64_t tokens = 0;
  for (const AttnSegment& seg : segs) tokens = std::max(tokens, seg.first_row + seg.num_new);
  std::vector<uint16_t> bf16(tokens * width);
  for (int64_t i = 0; i < tokens * width; ++i) bf16[i] = FloatToBf16(latent[i]);
  RETURN_IF_ERROR(kv->CalibrateLayerScale(layer_, bf16));  // FP8: the first batch fixes the scale
  for (const AttnSegment& seg : segs) {
    for (int64_t i = 0; i < seg.num_new;) {
      const int64_t pos = seg.past + i;
      const int64_t run = std::min(seg.num_new - i, page_tokens - pos % page_tokens);
      const uint16_t* rows = bf16.data() + (seg.first_row + i) * width;
      RETURN_IF_ERROR(kv->WriteRows(seg.seq->pages[pos / page_tokens], layer_, pos % page_tokens,
                                    std::span<const uint16_t>(rows, run * width)));
      i += run;
    }
  }
  return Status::Ok();
}

Status MlaAttention::Project(const float* h, int64_t tokens, std::span<const AttnSegment> segs,
                             ThreadPool* pool, const kernels::cpu::MatmulOptions& options,
                             std::vector<float>* q, std::vector<float>* q_resid,
                             std::vector<float>* latent) const {
  const ModelConfig& c = *config_;
  const MlaWeights& w = weights_->attn;
  const int64_t heads = c.num_attention_heads, qk = c.qk_head_dim(), nope = c.qk_nope_head_dim;
  const int64_t lora = c.kv_lora_rank, width = c.KvLatentWidth();
  q->resize(tokens * heads * qk);
  latent->resize(tokens * width);
  // The projections of h (q_a or q, and kv_a) in one job over both matrices' rows.
  if (c.has_q_lora()) q_resid->resize(tokens * c.q_lora_rank);
  const kernels::cpu::MatmulTask from_h[] = {
      {c.has_q_lora() ? &w.q_a_proj : &w.q_proj, h, tokens, c.has_q_lora() ? q_resid->data() : q->data()},
      {&w.kv_a_proj_with_mqa, h, tokens, latent->data()}};
  RETURN_IF_ERROR(kernels::cpu::MatmulBatch(from_h, pool, options));
  if (c.has_q_lora()) {
    RmsNormRows(q_resid->data(), tokens, c.q_lora_rank, c.q_lora_rank, w.q_a_layernorm.data(), 1e-6);
    RETURN_IF_ERROR(kernels::cpu::Matmul(w.q_b_proj, q_resid->data(), tokens, q->data(), pool, options));
  }
  RmsNormRows(latent->data(), tokens, lora, width, w.kv_a_layernorm.data(), 1e-6);
  for (const AttnSegment& seg : segs) {
    for (int64_t i = 0; i < seg.num_new; ++i) {
      const int64_t row = seg.first_row + i;
      rope_->Apply(q->data() + row * heads * qk + nope, heads, qk, seg.past + i);
      rope_->Apply(latent->data() + row * width + lora, 1, width, seg.past + i);
    }
  }
  return Status::Ok();
}

Status MlaAttention::GatherContexts(std::span<const AttnSegment> segs, const kv::PagePool& kv,
                                    std::vector<ContextRows>* rows) const {
  const int64_t page_tokens = static_cast<int64_t>(kv.page_tokens());
  rows->assign(segs.size(), ContextRows());
  for (size_t s = 0; s < segs.size(); ++s) {
    ContextRows& r = (*rows)[s];
    r.format = kv.dtype() == KvCacheDtype::kBf16 ? kernels::cpu::RowFormat::kBf16
                                                 : kernels::cpu::RowFormat::kFp8E4M3;
    r.page_tokens = page_tokens;
    r.width = config_->KvLatentWidth();
    for (int64_t t = 0; t < segs[s].context(); t += page_tokens) {
      StatusOr<const uint8_t*> page = kv.LatentRowsInPlace(segs[s].seq->pages[t / page_tokens], layer_);
      RETURN_IF_ERROR(page.status());
      r.pages.push_back(*page);
    }
  }
  return Status::Ok();
}

Status MlaAttention::Forward(const float* h, int64_t tokens, std::span<const AttnSegment> segs,
                             kv::PagePool* kv, bool use_indexer, std::vector<KeyMask>* index_masks,
                             ThreadPool* pool, const kernels::cpu::MatmulOptions& options, float* out,
                             Communicator* comm) const {
  const ModelConfig& c = *config_;
  std::vector<float> q, q_resid, latent;
  RETURN_IF_ERROR(Project(h, tokens, segs, pool, options, &q, &q_resid, &latent));
  const bool writer = comm == nullptr || comm->rank() == 0;
  RETURN_IF_ERROR(AgreeAcrossRanks(comm, writer ? WriteLatent(latent.data(), segs, kv) : Status::Ok()));
  if (c.has_indexer() && use_indexer && weights_->indexer.has_value()) {
    RETURN_IF_ERROR(DsaIndexerSelect(c, *weights_->indexer, *rope_, layer_, h, q_resid.data(), tokens, segs,
                                     kv, pool, options, index_masks, comm));
  } else if (!c.has_indexer() || !use_indexer || index_masks->size() != segs.size()) {
    index_masks->assign(segs.size(), KeyMask());
  }
  // Every context is read in place: BF16 rows as they are, FP8 codes with the layer's scale
  // folded into the arithmetic (a BF16 copy of each FP8 page cost a pass over the context at
  // every decode step).
  std::vector<ContextRows> rows;
  RETURN_IF_ERROR(GatherContexts(segs, *kv, &rows));
  const float kv_scale = kv->dtype() == KvCacheDtype::kBf16 ? 1.0f : kv->layer_scale(layer_);
  std::vector<float> attn(tokens * c.num_attention_heads * c.v_head_dim);  // [T, H, v]
  RETURN_IF_ERROR(AttendExpanded(segs, q.data(), rows, kv_scale, *index_masks, pool, options, attn.data()));
  RETURN_IF_ERROR(AttendAbsorbed(segs, q.data(), rows, kv_scale, *index_masks, pool, attn.data()));
  return kernels::cpu::Matmul(weights_->attn.o_proj, attn.data(), tokens, out, pool, options);
}

Status MlaAttention::AttendExpanded(std::span<const AttnSegment> segs, const float* q,
                                    std::span<const ContextRows> rows, float kv_scale,
                                    const std::vector<KeyMask>& masks, ThreadPool* pool,
                                    const kernels::cpu::MatmulOptions& options, float* attn) const {
  const ModelConfig& c = *config_;
  const int64_t heads = c.num_attention_heads, qk = c.qk_head_dim(), width = c.KvLatentWidth();
  // Decoded contexts, kept between calls on this thread: a context is hundreds of KB, and a
  // fresh vector per layer and step was zero-filled (and page-faulted) before being overwritten.
  // At most kKeptContextFloats stay held after the call (the rest is freed), so a long prefill
  // does not pin its contexts' memory.
  thread_local std::vector<std::vector<float>> held;
  std::vector<std::vector<float>>& lats = held;  // (the pool's threads below have their own `held`)
  if (lats.size() < segs.size()) lats.resize(segs.size());
  struct TrimOnExit {
    std::vector<std::vector<float>>& lats;
    ~TrimOnExit() {
      size_t kept = 0;
      for (std::vector<float>& v : lats) {
        kept += v.capacity();
        if (kept > kKeptContextFloats) std::vector<float>().swap(v);
      }
    }
  } trim_on_exit{lats};
  std::vector<std::pair<size_t, int64_t>> pages;  // (segment, first row) to decode
  for (size_t s = 0; s < segs.size(); ++s) {
    if (segs[s].form == MlaForm::kAbsorbed) continue;
    lats[s].resize(segs[s].context() * width);
    for (int64_t t = 0; t < segs[s].context(); t += rows[s].page_tokens) pages.emplace_back(s, t);
  }
  if (pages.empty()) return Status::Ok();
  // One ParallelFor over every page: a long prompt's context is many pages.
  pool->ParallelFor(static_cast<int64_t>(pages.size()), 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const auto [s, first] = pages[i];
      const int64_t run = std::min(rows[s].page_tokens, segs[s].context() - first);
      kernels::cpu::RowsToF32(rows[s].At(first), run, width, kv_scale, lats[s].data() + first * width);
    }
  });
  for (size_t s = 0; s < segs.size(); ++s) {
    const AttnSegment& seg = segs[s];
    if (seg.form == MlaForm::kAbsorbed) continue;
    RETURN_IF_ERROR(Expanded(seg, q + seg.first_row * heads * qk, lats[s], masks[s], pool, options,
                             attn + seg.first_row * heads * c.v_head_dim));
  }
  return Status::Ok();
}

Status MlaAttention::AttendAbsorbed(std::span<const AttnSegment> segs, const float* q,
                                    std::span<const ContextRows> rows, float kv_scale,
                                    const std::vector<KeyMask>& masks, ThreadPool* pool, float* attn) const {
  const ModelConfig& c = *config_;
  const int64_t heads = c.num_attention_heads, qk = c.qk_head_dim();
  std::vector<size_t> absorbed;
  for (size_t s = 0; s < segs.size(); ++s)
    if (segs[s].form == MlaForm::kAbsorbed) absorbed.push_back(s);
  if (absorbed.empty()) return Status::Ok();
  // Fewer decode segments than threads (batch 1): split the work three ways, so that each row of
  // the context is read by one thread, once (reading all of it on every thread made this phase
  // memory-bound). Otherwise every (absorbed segment, head) pair in one ParallelFor: a decode
  // batch is many segments of one token, each too little work to wake the pool for, and a
  // thread's consecutive heads of one segment share each pass over the context rows. Both give
  // the same bits: every block partial and every fold is computed the same way in either.
  int64_t split_floats = 0;  // the split's block partials: [num_new, blocks, H, PartialSize()] per segment
  for (size_t s : absorbed)
    split_floats += segs[s].num_new * Blocks(segs[s].context()) * heads * PartialSize();
  if (static_cast<int64_t>(absorbed.size()) < pool->num_threads() && split_floats <= kMaxSplitFloats) {
    return AbsorbedSplit(segs, absorbed, q, rows, kv_scale, masks, pool, attn);
  }
  pool->ParallelFor(static_cast<int64_t>(absorbed.size()) * heads, 1, [&](int64_t begin, int64_t end, int) {
    AbsorbedScratch scratch;
    for (int64_t i = begin; i < end;) {
      const size_t s = absorbed[i / heads];
      const int64_t h0 = i % heads, h1 = std::min(heads, h0 + (end - i));
      const AttnSegment& seg = segs[s];
      AbsorbedHeads(seg, q + seg.first_row * heads * qk, rows[s], kv_scale, masks[s], h0, h1, &scratch,
                    attn + seg.first_row * heads * c.v_head_dim);
      i += h1 - h0;
    }
  });
  return Status::Ok();
}

Status MlaAttention::Expanded(const AttnSegment& seg, const float* q, const std::vector<float>& lat,
                              const KeyMask& mask, ThreadPool* pool,
                              const kernels::cpu::MatmulOptions& options, float* out) const {
  const ModelConfig& c = *config_;
  const int64_t heads = c.num_attention_heads, qk = c.qk_head_dim(), nope = c.qk_nope_head_dim;
  const int64_t rope = c.qk_rope_head_dim, vdim = c.v_head_dim, lora = c.kv_lora_rank,
                width = c.KvLatentWidth();
  const int64_t ctx = seg.context(), per_head = nope + vdim;
  std::vector<float> cmat(ctx * lora);  // [ctx, kv_lora]
  for (int64_t t = 0; t < ctx; ++t) std::copy_n(lat.data() + t * width, lora, cmat.data() + t * lora);
  std::vector<float> kv(ctx * heads * per_head);  // [ctx, H, nope + v]
  RETURN_IF_ERROR(kernels::cpu::Matmul(weights_->attn.kv_b_proj, cmat.data(), ctx, kv.data(), pool, options));
  const double scale = c.AttentionSoftmaxScale();
  pool->ParallelFor(heads, 1, [&](int64_t h_begin, int64_t h_end, int) {
    std::vector<float> p(ctx);
    for (int64_t h = h_begin; h < h_end; ++h) {
      for (int64_t i = 0; i < seg.num_new; ++i) {
        const float* qh = q + (i * heads + h) * qk;
        for (int64_t j = 0; j < ctx; ++j) {
          if (!Allowed(seg, mask, i, j)) {
            p[j] = kNegInf;
            continue;
          }
          const float* kj = kv.data() + (j * heads + h) * per_head;
          const double s = static_cast<double>(kernels::cpu::DotF32(qh, kj, nope)) +
                           kernels::cpu::DotF32(qh + nope, lat.data() + j * width + lora, rope);
          p[j] = static_cast<float>(s * scale);
        }
        SoftmaxInPlace(p.data(), ctx);
        float* o = out + (i * heads + h) * vdim;
        std::fill(o, o + vdim, 0.0f);
        for (int64_t j = 0; j < ctx; ++j) {
          if (p[j] == 0.0f) continue;
          const float* vj = kv.data() + (j * heads + h) * per_head + nope;
          for (int64_t d = 0; d < vdim; ++d) o[d] += p[j] * vj[d];
        }
      }
    }
  });
  return Status::Ok();
}

void MlaAttention::QueryLatent(const float* qh, int64_t h, float* qc) const {
  const ModelConfig& c = *config_;
  const int64_t nope = c.qk_nope_head_dim, lora = c.kv_lora_rank;
  const int64_t uk = h * (nope + c.v_head_dim);  // W_UK rows of kv_b_proj
  // q_lat = W_UKᵀ q_nope: the head's nope rows of kv_b_proj weighted by q_nope, summed.
  if (kv_b_bf16_ != nullptr) {
    std::fill(qc, qc + lora, 0.0f);
    kernels::cpu::AttentionWeightedSums(
        qh, 1, nope, {kv_b_bf16_ + uk * lora, kernels::cpu::RowFormat::kBf16, lora}, nope, lora, qc, lora);
  } else if (kv_b_fp8_ != nullptr) {  // WeightedRowSum's bits: zeros, then row after row
    std::fill(qc, qc + lora, 0.0f);
    thread_local std::vector<float> row;
    row.resize(lora);
    for (int64_t r = 0; r < nope; ++r) {
      if (qh[r] == 0.0f) continue;
      kernels::cpu::DecodeWeightRow(*kv_b_fp8_, uk + r, row.data());
      kernels::cpu::AddScaledF32(qh[r], row.data(), qc, lora);
    }
  } else {
    kernels::cpu::WeightedRowSum(qh, kv_b_.data() + uk * lora, nope, lora, lora, qc);
  }
  std::copy_n(qh + nope, c.qk_rope_head_dim, qc + lora);
}

int64_t MlaAttention::BlockRows(int64_t ctx) {
  const int64_t rows = (std::max<int64_t>(ctx, 1) + kMaxBlocks - 1) / kMaxBlocks;
  return (rows + kBlockRowMultiple - 1) / kBlockRowMultiple * kBlockRowMultiple;
}

int64_t MlaAttention::Blocks(int64_t ctx) { return (ctx + BlockRows(ctx) - 1) / BlockRows(ctx); }

void MlaAttention::BlockPartials(const AttnSegment& seg, const ContextRows& rows, float kv_scale,
                                 const KeyMask& mask, int64_t i, int64_t first, int64_t block_rows,
                                 const float* q_cat, int64_t nh, std::vector<float>* s, float* part) const {
  const ModelConfig& c = *config_;
  const int64_t lora = c.kv_lora_rank, width = c.KvLatentWidth(), psize = PartialSize();
  const int64_t page_tokens = rows.page_tokens;
  const int64_t ctx = seg.context(), visible = std::min(ctx, seg.past + i + 1);
  const int64_t end = std::min(first + block_rows, visible), n = end - first;
  for (int64_t h = 0; h < nh; ++h) {
    float* ph = part + h * psize;
    std::fill(ph, ph + lora, 0.0f);
    ph[lora] = kNegInf;
    ph[lora + 1] = 0.0f;
  }
  if (n <= 0) return;
  // Scores of every head, then their weighted sums, over the block's rows page by page ([p0, p1)
  // within one page; a block may start or end mid-page): each row is read for all nh heads at once.
  s->resize(nh * block_rows);
  // The block's rows in runs: page by page in place; or, FP8 rows that more than 4 heads read
  // (the FP8 kernels decode a row chunk again for every 4 heads), widened once into a bf16 block,
  // which the kernels read with the same bits.
  const bool widen = rows.format == kernels::cpu::RowFormat::kFp8E4M3 && nh > kFp8InPlaceMaxHeads;
  thread_local std::vector<uint16_t> widened;
  if (widen) {
    widened.resize(n * width);
    for (int64_t p0 = first, p1; p0 < end; p0 = p1) {
      p1 = std::min(end, (p0 / page_tokens + 1) * page_tokens);
      kernels::cpu::Fp8RowsToBf16(rows.At(p0), p1 - p0, width, widened.data() + (p0 - first) * width);
    }
  }
  auto each_run = [&](auto fn) {
    if (widen) {
      fn(first, end, kernels::cpu::RowsRef{widened.data(), kernels::cpu::RowFormat::kBf16, width});
      return;
    }
    for (int64_t p0 = first, p1; p0 < end; p0 = p1) {
      p1 = std::min(end, (p0 / page_tokens + 1) * page_tokens);
      fn(p0, p1, rows.At(p0));
    }
  };
  each_run([&](int64_t p0, int64_t p1, kernels::cpu::RowsRef run) {
    kernels::cpu::AttentionScores(q_cat, nh, width, run, p1 - p0, width, s->data() + (p0 - first),
                                  block_rows);
  });
  // Per head: masked and scaled scores (an FP8 row's scale folded into the softmax scale), their
  // maximum m, the weights e_j = exp(s_j - m) and l.
  const float scale = static_cast<float>(c.AttentionSoftmaxScale()) * kv_scale;
  for (int64_t h = 0; h < nh; ++h) {
    float* sh = s->data() + h * block_rows;
    float m = kNegInf;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t j = first + r;
      sh[r] = mask.empty() || mask[i * ctx + j] != 0 ? sh[r] * scale : kNegInf;
      m = std::max(m, sh[r]);
    }
    float l = 0.0f;
    if (m != kNegInf) {
      for (int64_t r = 0; r < n; ++r) sh[r] -= m;  // masked rows stay -inf: their weight is 0
      kernels::cpu::ExpF32(sh, sh, n);
      for (int64_t r = 0; r < n; ++r) l += sh[r];
    } else {
      std::fill(sh, sh + n, 0.0f);  // every row masked: no weight, and the sums below skip them
    }
    part[h * psize + lora] = m;
    part[h * psize + lora + 1] = l;
  }
  // o = Σ e_j c_j of every head, page by page (the rows just scored, still in cache).
  each_run([&](int64_t p0, int64_t p1, kernels::cpu::RowsRef run) {
    kernels::cpu::AttentionWeightedSums(s->data() + (p0 - first), nh, block_rows, run, p1 - p0, lora, part,
                                        psize);
  });
}

void MlaAttention::FoldPartial(const float* part, float* state) const {
  const int64_t lora = config_->kv_lora_rank;
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

void MlaAttention::HeadFromState(const float* state, float kv_scale, int64_t h, std::vector<float>* o_lat,
                                 float* o) const {
  const ModelConfig& c = *config_;
  const int64_t lora = c.kv_lora_rank, vdim = c.v_head_dim;
  // l > 0 whenever a row is visible (a new token always sees itself); o = 0 otherwise. An FP8
  // row's scale applies here, once per head (1 for BF16: the same bits as without it).
  o_lat->assign(lora, 0.0f);
  if (state[lora + 1] > 0.0f) {
    const float inv = kv_scale / state[lora + 1];
    for (int64_t d = 0; d < lora; ++d) (*o_lat)[d] = state[d] * inv;
  }
  const int64_t uv = h * (c.qk_nope_head_dim + vdim) + c.qk_nope_head_dim;  // W_UV rows of kv_b_proj
  if (kv_b_bf16_ != nullptr) {
    kernels::cpu::AttentionScores(o_lat->data(), 1, lora,
                                  {kv_b_bf16_ + uv * lora, kernels::cpu::RowFormat::kBf16, lora}, vdim, lora,
                                  o, vdim);
  } else if (kv_b_fp8_ != nullptr) {
    thread_local std::vector<float> row;
    row.resize(lora);
    for (int64_t d = 0; d < vdim; ++d) {
      kernels::cpu::DecodeWeightRow(*kv_b_fp8_, uv + d, row.data());
      o[d] = kernels::cpu::DotF32(o_lat->data(), row.data(), lora);
    }
  } else {
    for (int64_t d = 0; d < vdim; ++d)
      o[d] = kernels::cpu::DotF32(o_lat->data(), kv_b_.data() + (uv + d) * lora, lora);
  }
}

void MlaAttention::AbsorbedHeads(const AttnSegment& seg, const float* q, const ContextRows& rows,
                                 float kv_scale, const KeyMask& mask, int64_t h0, int64_t h1,
                                 AbsorbedScratch* scratch, float* out) const {
  const ModelConfig& c = *config_;
  const int64_t heads = c.num_attention_heads, qk = c.qk_head_dim(), width = c.KvLatentWidth();
  const int64_t nh = h1 - h0, psize = PartialSize(), lora = c.kv_lora_rank;
  const int64_t block_rows = BlockRows(seg.context());
  scratch->q_cat.resize(nh * width);
  scratch->part.resize(nh * psize);
  scratch->state.resize(nh * psize);
  // fp32 with fused multiply-adds for the scores (Hugging Face's attention accumulates in fp32
  // too). Per head: q_cat = [W_UKᵀ q_nope | q_rope], laid out like a cached row [latent | rope], so
  // a score is one dot of width = lora + rope with the row.
  for (int64_t i = 0; i < seg.num_new; ++i) {
    for (int64_t h = h0; h < h1; ++h)
      QueryLatent(q + (i * heads + h) * qk, h, scratch->q_cat.data() + (h - h0) * width);
    for (int64_t h = 0; h < nh; ++h) scratch->state[h * psize + lora + 1] = 0.0f;
    const int64_t visible = std::min(seg.context(), seg.past + i + 1);
    for (int64_t first = 0; first < visible; first += block_rows) {
      BlockPartials(seg, rows, kv_scale, mask, i, first, block_rows, scratch->q_cat.data(), nh, &scratch->s,
                    scratch->part.data());
      for (int64_t h = 0; h < nh; ++h)
        FoldPartial(scratch->part.data() + h * psize, scratch->state.data() + h * psize);
    }
    for (int64_t h = h0; h < h1; ++h) {
      HeadFromState(scratch->state.data() + (h - h0) * psize, kv_scale, h, &scratch->o_lat,
                    out + (i * heads + h) * c.v_head_dim);
    }
  }
}

Status MlaAttention::AbsorbedSplit(std::span<const AttnSegment> segs, std::span<const size_t> absorbed,
                                   const float* q, std::span<const ContextRows> rows, float kv_scale,
                                   const std::vector<KeyMask>& masks, ThreadPool* pool, float* attn) const {
  const ModelConfig& c = *config_;
  const int64_t heads = c.num_attention_heads, qk = c.qk_head_dim(), width = c.KvLatentWidth();
  const int64_t psize = PartialSize();
  // Per absorbed segment: q_cat [num_new, H, width] and partials [num_new, blocks, H, psize], at
  // offsets into buffers this thread keeps between calls (at most kMaxSplitFloats of partials:
  // 4.2 MB for Kimi K2.x at batch 1), so no layer allocates, zero-fills or page-faults them anew.
  // Every partial the folds read is written first (an empty block writes l = 0).
  thread_local std::vector<float> q_cat_held, parts_held;
  std::vector<float*> q_cat(absorbed.size()), parts(absorbed.size());  // set once the buffers are sized
  std::vector<int64_t> q_cat_at(absorbed.size()), parts_at(absorbed.size());
  std::vector<int64_t> block_rows(absorbed.size()), blocks(absorbed.size());
  std::vector<std::array<int64_t, 3>> query_heads, query_blocks;  // (segment, token, head / block)
  int64_t q_cat_floats = 0, part_floats = 0;
  for (size_t a = 0; a < absorbed.size(); ++a) {
    const AttnSegment& seg = segs[absorbed[a]];
    block_rows[a] = BlockRows(seg.context());
    blocks[a] = Blocks(seg.context());
    q_cat_at[a] = q_cat_floats;
    parts_at[a] = part_floats;
    q_cat_floats += seg.num_new * heads * width;
    part_floats += seg.num_new * blocks[a] * heads * psize;
    for (int64_t i = 0; i < seg.num_new; ++i) {
      for (int64_t h = 0; h < heads; ++h) query_heads.push_back({static_cast<int64_t>(a), i, h});
      for (int64_t b = 0; b < blocks[a]; ++b) query_blocks.push_back({static_cast<int64_t>(a), i, b});
    }
  }
  if (static_cast<int64_t>(q_cat_held.size()) < q_cat_floats) q_cat_held.resize(q_cat_floats);
  if (static_cast<int64_t>(parts_held.size()) < part_floats) parts_held.resize(part_floats);
  for (size_t a = 0; a < absorbed.size(); ++a) {
    q_cat[a] = q_cat_held.data() + q_cat_at[a];
    parts[a] = parts_held.data() + parts_at[a];
  }
  // 1. q_cat of every head, heads split over the threads.
  pool->ParallelFor(static_cast<int64_t>(query_heads.size()), 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t k = begin; k < end; ++k) {
      const auto [a, i, h] = query_heads[k];
      const AttnSegment& seg = segs[absorbed[a]];
      QueryLatent(q + ((seg.first_row + i) * heads + h) * qk, h, q_cat[a] + (i * heads + h) * width);
    }
  });
  // 2. Partials of all heads, the context's blocks split over the threads: each row is read once.
  pool->ParallelFor(static_cast<int64_t>(query_blocks.size()), 1, [&](int64_t begin, int64_t end, int) {
    std::vector<float> s;
    for (int64_t k = begin; k < end; ++k) {
      const auto [a, i, b] = query_blocks[k];
      const size_t seg_index = absorbed[a];
      BlockPartials(segs[seg_index], rows[seg_index], kv_scale, masks[seg_index], i, b * block_rows[a],
                    block_rows[a], q_cat[a] + i * heads * width, heads, &s,
                    parts[a] + (i * blocks[a] + b) * heads * psize);
    }
  });
  // 3. Per head: the blocks' partials folded in order, then W_UV; heads split over the threads.
  pool->ParallelFor(static_cast<int64_t>(query_heads.size()), 1, [&](int64_t begin, int64_t end, int) {
    std::vector<float> state(psize), o_lat;
    for (int64_t k = begin; k < end; ++k) {
      const auto [a, i, h] = query_heads[k];
      const AttnSegment& seg = segs[absorbed[a]];
      state[c.kv_lora_rank + 1] = 0.0f;
      for (int64_t b = 0; b < blocks[a]; ++b)
        FoldPartial(parts[a] + ((i * blocks[a] + b) * heads + h) * psize, state.data());
      HeadFromState(state.data(), kv_scale, h, &o_lat,
                    attn + ((seg.first_row + i) * heads + h) * c.v_head_dim);
    }
  });
  return Status::Ok();
}

}  // namespace tandem::engine::model
