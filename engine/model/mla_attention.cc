#include "engine/model/mla_attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "engine/formats/float_codecs.h"
#include "engine/model/dsa_indexer.h"

namespace tandem::engine::model {
namespace {

// Decoded contexts kept between calls per thread (see Forward): 16 MiB of fp32.
constexpr size_t kKeptContextFloats = size_t{4} << 20;

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
                             const kernels::Backend& be, std::vector<float>* q, std::vector<float>* q_resid,
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
  RETURN_IF_ERROR(be.MatmulBatch(from_h));
  if (c.has_q_lora()) {
    be.RmsNormRows(q_resid->data(), tokens, c.q_lora_rank, c.q_lora_rank, w.q_a_layernorm.data(), 1e-6);
    RETURN_IF_ERROR(be.Matmul(w.q_b_proj, q_resid->data(), tokens, q->data()));
  }
  be.RmsNormRows(latent->data(), tokens, lora, width, w.kv_a_layernorm.data(), 1e-6);
  const std::vector<int64_t> positions = Positions(segs, tokens);
  be.RopeRows(rope_->table(), q->data() + nope, tokens, heads * qk, heads, qk, positions.data());
  be.RopeRows(rope_->table(), latent->data() + lora, tokens, width, 1, width, positions.data());
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
                             ThreadPool* pool, const kernels::Backend& be, float* out,
                             Communicator* comm) const {
  const ModelConfig& c = *config_;
  std::vector<float> q, q_resid, latent;
  RETURN_IF_ERROR(Project(h, tokens, segs, be, &q, &q_resid, &latent));
  const bool writer = comm == nullptr || comm->rank() == 0;
  RETURN_IF_ERROR(AgreeAcrossRanks(comm, writer ? WriteLatent(latent.data(), segs, kv) : Status::Ok()));
  if (c.has_indexer() && use_indexer && weights_->indexer.has_value()) {
    RETURN_IF_ERROR(DsaIndexerSelect(c, *weights_->indexer, *rope_, layer_, h, q_resid.data(), tokens, segs,
                                     kv, be, index_masks, comm));
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
  RETURN_IF_ERROR(AttendExpanded(segs, q.data(), rows, kv_scale, *index_masks, pool, be, attn.data()));
  RETURN_IF_ERROR(AttendAbsorbed(segs, q.data(), rows, kv_scale, *index_masks, pool, be, attn.data()));
  return be.Matmul(weights_->attn.o_proj, attn.data(), tokens, out);
}

Status MlaAttention::AttendExpanded(std::span<const AttnSegment> segs, const float* q,
                                    std::span<const ContextRows> rows, float kv_scale,
                                    const std::vector<KeyMask>& masks, ThreadPool* pool,
                                    const kernels::Backend& be, float* attn) const {
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
      be.RowsToF32(rows[s].At(first), run, width, kv_scale, lats[s].data() + first * width);
    }
  });
  for (size_t s = 0; s < segs.size(); ++s) {
    const AttnSegment& seg = segs[s];
    if (seg.form == MlaForm::kAbsorbed) continue;
    RETURN_IF_ERROR(Expanded(seg, q + seg.first_row * heads * qk, lats[s], masks[s], be,
                             attn + seg.first_row * heads * c.v_head_dim));
  }
  return Status::Ok();
}

Status MlaAttention::AttendAbsorbed(std::span<const AttnSegment> segs, const float* q,
                                    std::span<const ContextRows> rows, float kv_scale,
                                    const std::vector<KeyMask>& masks, ThreadPool* pool,
                                    const kernels::Backend& be, float* attn) const {
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
  int64_t split_floats = 0;  // the split's block partials: one query's per new token
  const kernels::cpu::MlaDecodeShape shape = DecodeShape(kv_scale);
  for (size_t s : absorbed)
    split_floats += segs[s].num_new * kernels::cpu::MlaDecodePartialFloats(segs[s].context(), shape);
  if (static_cast<int64_t>(absorbed.size()) < pool->num_threads() && split_floats <= kMaxSplitFloats) {
    return AbsorbedSplit(segs, absorbed, q, rows, kv_scale, masks, pool, be, attn);
  }
  pool->ParallelFor(static_cast<int64_t>(absorbed.size()) * heads, 1, [&](int64_t begin, int64_t end, int) {
    AbsorbedScratch scratch;
    for (int64_t i = begin; i < end;) {
      const size_t s = absorbed[i / heads];
      const int64_t h0 = i % heads, h1 = std::min(heads, h0 + (end - i));
      const AttnSegment& seg = segs[s];
      AbsorbedHeads(be, seg, q + seg.first_row * heads * qk, rows[s], kv_scale, masks[s], h0, h1, &scratch,
                    attn + seg.first_row * heads * c.v_head_dim);
      i += h1 - h0;
    }
  });
  return Status::Ok();
}

Status MlaAttention::Expanded(const AttnSegment& seg, const float* q, const std::vector<float>& lat,
                              const KeyMask& mask, const kernels::Backend& be, float* out) const {
  const ModelConfig& c = *config_;
  const int64_t heads = c.num_attention_heads, nope = c.qk_nope_head_dim, lora = c.kv_lora_rank;
  const int64_t width = c.KvLatentWidth(), ctx = seg.context(), per_head = nope + c.v_head_dim;
  std::vector<float> cmat(ctx * lora);  // [ctx, kv_lora]
  for (int64_t t = 0; t < ctx; ++t) std::copy_n(lat.data() + t * width, lora, cmat.data() + t * lora);
  std::vector<float> kv(ctx * heads * per_head);  // [ctx, H, nope + v]
  RETURN_IF_ERROR(be.Matmul(weights_->attn.kv_b_proj, cmat.data(), ctx, kv.data()));
  kernels::cpu::MlaPrefillInput in;
  in.q = q;
  in.kv = kv.data();
  in.k_rope = lat.data() + lora;  // each cached row's rotary part
  in.k_rope_stride = width;
  in.past = seg.past;
  in.num_new = seg.num_new;
  in.mask = mask.empty() ? nullptr : mask.data();
  kernels::cpu::MlaPrefillShape shape;
  shape.heads = heads;
  shape.nope = nope;
  shape.rope = c.qk_rope_head_dim;
  shape.v = c.v_head_dim;
  shape.scale = static_cast<float>(c.AttentionSoftmaxScale());
  be.MlaPrefill(in, shape, out);
  return Status::Ok();
}

void MlaAttention::QueryLatent(const kernels::Backend& be, const float* qh, int64_t h, float* qc) const {
  const ModelConfig& c = *config_;
  const int64_t nope = c.qk_nope_head_dim, lora = c.kv_lora_rank;
  const int64_t uk = h * (nope + c.v_head_dim);  // W_UK rows of kv_b_proj
  // q_lat = W_UKᵀ q_nope: the head's nope rows of kv_b_proj weighted by q_nope, summed.
  if (kv_b_bf16_ != nullptr) {
    std::fill(qc, qc + lora, 0.0f);
    be.AttentionWeightedSums(qh, 1, nope, {kv_b_bf16_ + uk * lora, kernels::cpu::RowFormat::kBf16, lora},
                             nope, lora, qc, lora);
  } else if (kv_b_fp8_ != nullptr) {  // WeightedRowSum's bits: zeros, then row after row
    std::fill(qc, qc + lora, 0.0f);
    thread_local std::vector<float> row;
    row.resize(lora);
    for (int64_t r = 0; r < nope; ++r) {
      if (qh[r] == 0.0f) continue;
      be.DecodeWeightRow(*kv_b_fp8_, uk + r, row.data());
      be.AddScaled(qh[r], row.data(), qc, lora);
    }
  } else {
    be.WeightedRowSum(qh, kv_b_.data() + uk * lora, nope, lora, lora, qc);
  }
  std::copy_n(qh + nope, c.qk_rope_head_dim, qc + lora);
}

kernels::cpu::MlaDecodeShape MlaAttention::DecodeShape(float kv_scale) const {
  kernels::cpu::MlaDecodeShape shape;
  shape.heads = config_->num_attention_heads;
  shape.kv_lora = config_->kv_lora_rank;
  shape.score_scale = static_cast<float>(config_->AttentionSoftmaxScale()) * kv_scale;
  shape.kv_scale = kv_scale;
  return shape;
}

kernels::cpu::MlaQuery MlaAttention::Query(const AttnSegment& seg, const ContextRows& rows,
                                           const KeyMask& mask, int64_t i, const float* q_cat) {
  kernels::cpu::MlaQuery query;
  query.q_cat = q_cat;
  query.rows = rows.Paged();
  query.context = seg.context();
  query.visible = std::min(seg.context(), seg.past + i + 1);
  query.mask = mask.empty() ? nullptr : mask.data() + i * seg.context();
  return query;
}

void MlaAttention::OutputFromLatent(const kernels::Backend& be, const float* o_lat, int64_t h,
                                    float* o) const {
  const ModelConfig& c = *config_;
  const int64_t lora = c.kv_lora_rank, vdim = c.v_head_dim;
  const int64_t uv = h * (c.qk_nope_head_dim + vdim) + c.qk_nope_head_dim;  // W_UV rows of kv_b_proj
  if (kv_b_bf16_ != nullptr) {
    be.AttentionScores(o_lat, 1, lora, {kv_b_bf16_ + uv * lora, kernels::cpu::RowFormat::kBf16, lora}, vdim,
                       lora, o, vdim);
  } else if (kv_b_fp8_ != nullptr) {
    thread_local std::vector<float> row;
    row.resize(lora);
    for (int64_t d = 0; d < vdim; ++d) {
      be.DecodeWeightRow(*kv_b_fp8_, uv + d, row.data());
      o[d] = be.Dot(o_lat, row.data(), lora);
    }
  } else {
    for (int64_t d = 0; d < vdim; ++d) o[d] = be.Dot(o_lat, kv_b_.data() + (uv + d) * lora, lora);
  }
}

void MlaAttention::AbsorbedHeads(const kernels::Backend& be, const AttnSegment& seg, const float* q,
                                 const ContextRows& rows, float kv_scale, const KeyMask& mask, int64_t h0,
                                 int64_t h1, AbsorbedScratch* scratch, float* out) const {
  const ModelConfig& c = *config_;
  const int64_t heads = c.num_attention_heads, qk = c.qk_head_dim(), width = c.KvLatentWidth();
  const int64_t nh = h1 - h0, lora = c.kv_lora_rank;
  const kernels::cpu::MlaDecodeShape shape = DecodeShape(kv_scale);
  scratch->q_cat.resize(nh * width);
  scratch->o_lat.resize(nh * lora);
  for (int64_t i = 0; i < seg.num_new; ++i) {
    for (int64_t h = h0; h < h1; ++h)
      QueryLatent(be, q + (i * heads + h) * qk, h, scratch->q_cat.data() + (h - h0) * width);
    be.MlaDecodeHeads(Query(seg, rows, mask, i, scratch->q_cat.data()), nh, shape, scratch->o_lat.data());
    for (int64_t h = h0; h < h1; ++h)
      OutputFromLatent(be, scratch->o_lat.data() + (h - h0) * lora, h, out + (i * heads + h) * c.v_head_dim);
  }
}

Status MlaAttention::AbsorbedSplit(std::span<const AttnSegment> segs, std::span<const size_t> absorbed,
                                   const float* q, std::span<const ContextRows> rows, float kv_scale,
                                   const std::vector<KeyMask>& masks, ThreadPool* pool,
                                   const kernels::Backend& be, float* attn) const {
  const ModelConfig& c = *config_;
  const int64_t heads = c.num_attention_heads, qk = c.qk_head_dim(), width = c.KvLatentWidth();
  const int64_t lora = c.kv_lora_rank;
  // One query per new token of each absorbed segment: q_cat [queries, H, width] and the latent
  // outputs [queries, H, kv_lora], in buffers this thread keeps between calls.
  thread_local std::vector<float> q_cat_held, o_lat_held;
  std::vector<std::array<int64_t, 2>> tokens;  // (absorbed index, token) per query
  for (size_t a = 0; a < absorbed.size(); ++a) {
    for (int64_t i = 0; i < segs[absorbed[a]].num_new; ++i) tokens.push_back({static_cast<int64_t>(a), i});
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (static_cast<int64_t>(q_cat_held.size()) < n * heads * width) q_cat_held.resize(n * heads * width);
  if (static_cast<int64_t>(o_lat_held.size()) < n * heads * lora) o_lat_held.resize(n * heads * lora);
  // Plain pointers for the pool's threads (a thread_local named in a lambda is the running thread's).
  float* const q_cat = q_cat_held.data();
  float* const o_lat = o_lat_held.data();
  // 1. q_cat of every (query, head), split over the threads.
  pool->ParallelFor(n * heads, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t k = begin; k < end; ++k) {
      const auto [a, i] = tokens[k / heads];
      const AttnSegment& seg = segs[absorbed[a]];
      QueryLatent(be, q + ((seg.first_row + i) * heads + k % heads) * qk, k % heads, q_cat + k * width);
    }
  });
  // 2. The paged attention (engine/kernels/cpu/mla_decode.h): each context row read once.
  std::vector<kernels::cpu::MlaQuery> queries;
  for (int64_t k = 0; k < n; ++k) {
    const auto [a, i] = tokens[k];
    const size_t s = absorbed[a];
    queries.push_back(Query(segs[s], rows[s], masks[s], i, q_cat + k * heads * width));
  }
  be.MlaDecode(queries, DecodeShape(kv_scale), o_lat);
  // 3. W_UV of every (query, head), split over the threads.
  pool->ParallelFor(n * heads, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t k = begin; k < end; ++k) {
      const auto [a, i] = tokens[k / heads];
      const AttnSegment& seg = segs[absorbed[a]];
      OutputFromLatent(be, o_lat + k * lora, k % heads,
                       attn + ((seg.first_row + i) * heads + k % heads) * c.v_head_dim);
    }
  });
  return Status::Ok();
}

}  // namespace tandem::engine::model
