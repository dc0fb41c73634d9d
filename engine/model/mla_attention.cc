#include "engine/model/mla_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/formats/float_codecs.h"
#include "engine/kernels/cpu/matmul_batch.h"
#include "engine/model/dsa_indexer.h"
#include "engine/model/vec_ops.h"

namespace tandem::engine::model {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Decoded contexts kept between calls per thread (see Forward): 16 MiB of fp32.
constexpr size_t kKeptContextFloats = size_t{4} << 20;

// Whether query i of `seg` may read key j: causal, and chosen by the indexer when it masked.
bool Allowed(const AttnSegment& seg, const KeyMask& mask, int64_t i, int64_t j) {
  if (j > seg.past + i) return false;
  return mask.empty() || mask[i * seg.context() + j] != 0;
}

float Dot(const float* a, const float* b, int64_t n) { return DotF32(a, b, n); }

}  // namespace

StatusOr<MlaAttention> MlaAttention::Create(const ModelConfig& config, const LayerWeights& weights,
                                            int64_t layer, const Rope* rope, ThreadPool* pool) {
  MlaAttention a(config, weights, layer, rope);
  // kv_b_projᵀ through the Matmul kernel itself (identity · Wᵀ), whatever the weight's format.
  const int64_t lora = config.kv_lora_rank;
  const int64_t n = weights.attn.kv_b_proj.rows();
  std::vector<float> eye(lora * lora, 0.0f);
  for (int64_t i = 0; i < lora; ++i) eye[i * lora + i] = 1.0f;
  a.kv_b_t_.resize(lora * n);
  RETURN_IF_ERROR(kernels::cpu::Matmul(weights.attn.kv_b_proj, eye.data(), lora, a.kv_b_t_.data(), pool));
  a.kv_b_.resize(n * lora);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t cc = 0; cc < lora; ++cc) a.kv_b_[r * lora + cc] = a.kv_b_t_[cc * n + r];
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

Status MlaAttention::ReadContextPage(const AttnSegment& seg, const kv::PagePool& kv, int64_t first,
                                     float* lat) const {
  const int64_t width = config_->KvLatentWidth();
  const int64_t page_tokens = static_cast<int64_t>(kv.page_tokens());
  thread_local std::vector<uint16_t> bf16;  // one page of rows, reused: no zero-fill per read
  bf16.resize(page_tokens * width);
  const int64_t run = std::min(page_tokens, seg.context() - first);
  RETURN_IF_ERROR(kv.ReadRows(seg.seq->pages[first / page_tokens], layer_, 0,
                              std::span<uint16_t>(bf16.data(), run * width)));
  Bf16ToF32(bf16.data(), lat + first * width, run * width);
  return Status::Ok();
}

Status MlaAttention::Forward(const float* h, int64_t tokens, std::span<const AttnSegment> segs,
                             kv::PagePool* kv, bool use_indexer, std::vector<KeyMask>* index_masks,
                             ThreadPool* pool, const kernels::cpu::MatmulOptions& options, float* out) const {
  const ModelConfig& c = *config_;
  const MlaWeights& w = weights_->attn;
  const int64_t heads = c.num_attention_heads, qk = c.qk_head_dim(), nope = c.qk_nope_head_dim;
  const int64_t lora = c.kv_lora_rank, width = c.KvLatentWidth();
  std::vector<float> q(tokens * heads * qk), q_resid;  // q: [T, H, nope + rope]
  std::vector<float> latent(tokens * width);           // [T, kv_lora + rope]
  // The projections of h (q_a or q, and kv_a) in one job over both matrices' rows.
  if (c.has_q_lora()) q_resid.resize(tokens * c.q_lora_rank);  // [T, q_lora]
  const kernels::cpu::MatmulTask from_h[] = {
      {c.has_q_lora() ? &w.q_a_proj : &w.q_proj, h, tokens, c.has_q_lora() ? q_resid.data() : q.data()},
      {&w.kv_a_proj_with_mqa, h, tokens, latent.data()}};
  RETURN_IF_ERROR(kernels::cpu::MatmulBatch(from_h, pool, options));
  if (c.has_q_lora()) {
    RmsNormRows(q_resid.data(), tokens, c.q_lora_rank, c.q_lora_rank, w.q_a_layernorm.data(), 1e-6);
    RETURN_IF_ERROR(kernels::cpu::Matmul(w.q_b_proj, q_resid.data(), tokens, q.data(), pool, options));
  }
  RmsNormRows(latent.data(), tokens, lora, width, w.kv_a_layernorm.data(), 1e-6);
  for (const AttnSegment& seg : segs) {
    for (int64_t i = 0; i < seg.num_new; ++i) {
      const int64_t row = seg.first_row + i;
      rope_->Apply(q.data() + row * heads * qk + nope, heads, qk, seg.past + i);
      rope_->Apply(latent.data() + row * width + lora, 1, width, seg.past + i);
    }
  }
  RETURN_IF_ERROR(WriteLatent(latent.data(), segs, kv));

  if (c.has_indexer() && use_indexer && weights_->indexer.has_value()) {
    RETURN_IF_ERROR(DsaIndexerSelect(c, *weights_->indexer, *rope_, layer_, h, q_resid.data(), tokens, segs,
                                     pool, options, index_masks));
  } else if (!c.has_indexer() || !use_indexer || index_masks->size() != segs.size()) {
    index_masks->assign(segs.size(), KeyMask());
  }

  std::vector<float> attn(tokens * heads * c.v_head_dim);  // [T, H, v]
  // Decoded contexts, kept between calls on this thread: a context is hundreds of KB, and a
  // fresh vector per layer and step was zero-filled (and page-faulted) before being overwritten.
  // At most kKeptContextFloats stay held after the call (the rest is freed), so a long prefill
  // or a large batch does not pin its contexts' memory.
  // (A reference: the lambdas below run on the pool's threads, which have their own `held`.)
  thread_local std::vector<std::vector<float>> held;
  std::vector<std::vector<float>>& lats = held;
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
  std::vector<size_t> absorbed;
  // Contexts decoded (pages -> fp32) in parallel, page by page: at batch 1 one context is the
  // only serial work of the step left, at batch 32 the contexts are most of the layer's.
  const int64_t page_tokens = static_cast<int64_t>(kv->page_tokens());
  std::vector<std::pair<size_t, int64_t>> pages;  // (segment, first row of the page)
  for (size_t s = 0; s < segs.size(); ++s) {
    lats[s].resize(segs[s].context() * width);
    for (int64_t t = 0; t < segs[s].context(); t += page_tokens) pages.emplace_back(s, t);
  }
  std::vector<Status> read_status(pages.size(), Status::Ok());
  pool->ParallelFor(static_cast<int64_t>(pages.size()), 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const auto [s, first] = pages[i];
      read_status[i] = ReadContextPage(segs[s], *kv, first, lats[s].data());
    }
  });
  for (const Status& st : read_status) RETURN_IF_ERROR(st);
  for (size_t s = 0; s < segs.size(); ++s) {
    const AttnSegment& seg = segs[s];
    if (seg.form == MlaForm::kAbsorbed) {
      absorbed.push_back(s);
      continue;
    }
    RETURN_IF_ERROR(Expanded(seg, q.data() + seg.first_row * heads * qk, lats[s], (*index_masks)[s], pool,
                             options, attn.data() + seg.first_row * heads * c.v_head_dim));
  }
  // Every (absorbed segment, head) pair in one ParallelFor: a decode batch is many segments of
  // one token, each too little work to wake the pool for.
  pool->ParallelFor(static_cast<int64_t>(absorbed.size()) * heads, 1, [&](int64_t begin, int64_t end, int) {
    AbsorbedScratch scratch;
    for (int64_t i = begin; i < end; ++i) {
      const size_t s = absorbed[i / heads];
      const AttnSegment& seg = segs[s];
      AbsorbedHead(seg, q.data() + seg.first_row * heads * qk, lats[s], (*index_masks)[s], i % heads,
                   &scratch, attn.data() + seg.first_row * heads * c.v_head_dim);
    }
  });
  return kernels::cpu::Matmul(w.o_proj, attn.data(), tokens, out, pool, options);
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
          const double s =
              static_cast<double>(Dot(qh, kj, nope)) + Dot(qh + nope, lat.data() + j * width + lora, rope);
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

void MlaAttention::AbsorbedHead(const AttnSegment& seg, const float* q, const std::vector<float>& lat,
                                const KeyMask& mask, int64_t h, AbsorbedScratch* scratch, float* out) const {
  const ModelConfig& c = *config_;
  const int64_t heads = c.num_attention_heads, qk = c.qk_head_dim(), nope = c.qk_nope_head_dim;
  const int64_t rope = c.qk_rope_head_dim, vdim = c.v_head_dim, lora = c.kv_lora_rank,
                width = c.KvLatentWidth();
  const int64_t ctx = seg.context(), n_cols = heads * (nope + vdim);
  const double scale = c.AttentionSoftmaxScale();
  std::vector<float>& p = scratch->p;
  std::vector<float>& q_cat = scratch->q_cat;
  std::vector<float>& o_lat = scratch->o_lat;
  p.resize(ctx);
  q_cat.resize(width);
  o_lat.resize(lora);
  // Every dot product in fp32 with fused multiply-adds (DotF32; Hugging Face's attention
  // accumulates in fp32 too): the query's nope part against W_UK, [q_lat | q_rope] against every
  // context row (laid out like a row [latent | rope]: one dot of width = lora + rope per row), o_lat
  // against W_UV.
  const int64_t uk = h * (nope + vdim), uv = uk + nope;  // W_UK / W_UV columns of kv_b_projᵀ
  const float fscale = static_cast<float>(scale);
  for (int64_t i = 0; i < seg.num_new; ++i) {
    const float* qh = q + (i * heads + h) * qk;
    for (int64_t cc = 0; cc < lora; ++cc) q_cat[cc] = DotF32(qh, kv_b_t_.data() + cc * n_cols + uk, nope);
    std::copy_n(qh + nope, rope, q_cat.data() + lora);
    for (int64_t j = 0; j < ctx; ++j) {
      if (!Allowed(seg, mask, i, j)) {
        p[j] = kNegInf;
        continue;
      }
      p[j] = DotF32(q_cat.data(), lat.data() + j * width, width) * fscale;
    }
    SoftmaxInPlace(p.data(), ctx);
    WeightedRowSum(p.data(), lat.data(), ctx, width, lora, o_lat.data());
    float* o = out + (i * heads + h) * vdim;
    for (int64_t d = 0; d < vdim; ++d) o[d] = DotF32(o_lat.data(), kv_b_.data() + (uv + d) * lora, lora);
  }
}

}  // namespace tandem::engine::model
