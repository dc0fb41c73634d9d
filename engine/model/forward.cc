#include "engine/model/forward.h"

#include <algorithm>
#include <set>
#include <string>

#include "engine/kernels/cpu/cpu_backend.h"
#include "engine/model/kv_shape.h"
#include "engine/model/moe.h"

namespace tandem::engine::model {

namespace {

// The expanded form materializes per-head keys and values of the whole context
// ([ctx, H, nope + v] fp32); past this many values the absorbed form is used instead.
constexpr int64_t kMaxExpandedValues = int64_t{1} << 26;  // 256 MiB

MlaForm AutoForm(const ModelConfig& c, const AttnSegment& seg) {
  if (seg.num_new == 1) return MlaForm::kAbsorbed;
  const int64_t values = seg.context() * c.num_attention_heads * (c.qk_nope_head_dim + c.v_head_dim);
  return values <= kMaxExpandedValues ? MlaForm::kExpanded : MlaForm::kAbsorbed;
}

// The same rows on every layer (an index_layers list of all true is the same as an empty one).
bool SameRows(const kv::KvShape& a, const kv::KvShape& b) {
  if (a.num_layers != b.num_layers || a.kv_lora_rank != b.kv_lora_rank || a.rope_dim != b.rope_dim ||
      a.index_head_dim != b.index_head_dim) {
    return false;
  }
  for (size_t l = 0; l < a.num_layers; ++l) {
    if (a.HasIndexRows(l) != b.HasIndexRows(l)) return false;
  }
  return true;
}

}  // namespace

ModelRunner::ModelRunner(const ModelWeights& weights, ThreadPool* pool, kv::PagePool* kv)
    : weights_(weights), pool_(pool), kv_(kv), rope_(weights.config.rope, weights.config.qk_rope_head_dim) {}

StatusOr<std::unique_ptr<ModelRunner>> ModelRunner::Create(const ModelWeights& weights, ThreadPool* pool,
                                                           kv::PagePool* kv) {
  const ModelConfig& c = weights.config;
  const kv::KvShape& shape = kv->config().shape;
  const kv::KvShape want = KvShapeFor(c);
  if (!SameRows(shape, want)) {
    return Status::InvalidArgument("KV page pool shape (" + DescribeKvShape(shape) +
                                   ") does not match the model (" + DescribeKvShape(want) +
                                   "; make the pool with KvShapeFor)");
  }
  if (c.has_indexer() && !c.has_q_lora()) {
    return Status::InvalidArgument(
        "glm_moe_dsa needs q_lora_rank: the DSA indexer reads the q_a_layernorm output");
  }
  if (static_cast<int64_t>(weights.layers.size()) != c.num_hidden_layers) {
    return Status::InvalidArgument("weights hold " + std::to_string(weights.layers.size()) +
                                   " layers, config " + std::to_string(c.num_hidden_layers));
  }
  std::unique_ptr<ModelRunner> runner(new ModelRunner(weights, pool, kv));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    ASSIGN_OR_RETURN(MlaAttention a, MlaAttention::Create(c, weights.layers[l], l, &runner->rope_, pool));
    runner->attention_.push_back(std::move(a));
  }
  return runner;
}

int64_t ModelRunner::PagesNeeded(const KvSequence& seq, int64_t new_tokens) const {
  const int64_t page_tokens = static_cast<int64_t>(kv_->page_tokens());
  return (seq.num_tokens + new_tokens + page_tokens - 1) / page_tokens;
}

Status ModelRunner::Validate(std::span<const StepInput> batch) const {
  if (batch.empty()) return Status::InvalidArgument("empty batch");
  std::set<const KvSequence*> seen;
  for (size_t b = 0; b < batch.size(); ++b) {
    const StepInput& in = batch[b];
    const std::string where = "batch entry " + std::to_string(b);
    if (in.seq == nullptr) return Status::InvalidArgument(where + ": null sequence");
    if (!seen.insert(in.seq).second) return Status::InvalidArgument(where + ": sequence appears twice");
    if (in.tokens.empty()) return Status::InvalidArgument(where + ": no tokens");
    for (int32_t t : in.tokens) {
      if (t < 0 || t >= config().vocab_size) {
        return Status::InvalidArgument(where + ": token id " + std::to_string(t) +
                                       " outside the vocabulary of " + std::to_string(config().vocab_size));
      }
    }
    const int64_t need = PagesNeeded(*in.seq, static_cast<int64_t>(in.tokens.size()));
    if (static_cast<int64_t>(in.seq->pages.size()) < need) {
      return Status::FailedPrecondition(where + ": needs " + std::to_string(need) + " KV pages, holds " +
                                        std::to_string(in.seq->pages.size()));
    }
    for (int64_t p = 0; p < need; ++p) {
      if (in.seq->pages[p] >= kv_->num_pages()) {
        return Status::FailedPrecondition(where + ": page " + std::to_string(in.seq->pages[p]) +
                                          " outside the pool of " + std::to_string(kv_->num_pages()));
      }
    }
  }
  return Status::Ok();
}

Status ModelRunner::Forward(std::span<const StepInput> batch, const ForwardOptions& options,
                            std::vector<float>* logits) {
  RETURN_IF_ERROR(Validate(batch));
  const ModelConfig& c = config();
  const int64_t hidden = c.hidden_size;
  std::vector<AttnSegment> segs;
  int64_t tokens = 0;
  for (const StepInput& in : batch) {
    AttnSegment seg;
    seg.seq = in.seq;
    seg.first_row = tokens;
    seg.num_new = static_cast<int64_t>(in.tokens.size());
    seg.past = in.seq->num_tokens;
    seg.form = options.form != MlaForm::kAuto ? options.form : AutoForm(c, seg);
    tokens += seg.num_new;
    segs.push_back(seg);
  }
  const kernels::cpu::CpuBackend cpu(pool_, options.matmul);
  const kernels::Backend& be = options.backend != nullptr ? *options.backend : cpu;
  std::vector<int32_t> ids;  // in packed row order
  for (const StepInput& in : batch) ids.insert(ids.end(), in.tokens.begin(), in.tokens.end());
  std::vector<float> x(tokens * hidden);  // [T, hidden] residual stream
  be.GatherRows(weights_.embed_tokens.data(), hidden, ids.data(), tokens, x.data());
  std::vector<KeyMask> index_masks;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    RETURN_IF_ERROR(Layer(l, segs, tokens, options, be, &index_masks, &x));
  }
  if (!options.all_logits) {  // keep each input's last row
    for (size_t b = 0; b < segs.size(); ++b) {
      std::copy_n(x.data() + (segs[b].first_row + segs[b].num_new - 1) * hidden, hidden,
                  x.data() + b * hidden);
    }
    tokens = static_cast<int64_t>(segs.size());
  }
  be.RmsNormRows(x.data(), tokens, hidden, hidden, weights_.norm.data(), c.rms_norm_eps);
  logits->resize(tokens * c.vocab_size);
  RETURN_IF_ERROR(be.Matmul(weights_.lm_head, x.data(), tokens, logits->data()));
  // Only now: a failure above leaves every sequence as it was (slots past num_tokens don't count).
  for (const AttnSegment& seg : segs) seg.seq->num_tokens += seg.num_new;
  return Status::Ok();
}

Status ModelRunner::Layer(int64_t layer, std::span<const AttnSegment> segs, int64_t tokens,
                          const ForwardOptions& options, const kernels::Backend& be,
                          std::vector<KeyMask>* index_masks, std::vector<float>* x) const {
  const ModelConfig& c = config();
  const LayerWeights& w = weights_.layers[layer];
  const int64_t n = tokens * c.hidden_size;
  std::vector<float> h(x->begin(), x->end()), delta(n);
  be.RmsNormRows(h.data(), tokens, c.hidden_size, c.hidden_size, w.input_layernorm.data(), c.rms_norm_eps);
  RETURN_IF_ERROR(attention_[layer].Forward(h.data(), tokens, segs, kv_, options.use_indexer, index_masks,
                                            pool_, be, delta.data(), comm_));
  if (comm_ != nullptr) RETURN_IF_ERROR(comm_->AllReduceSum(delta.data(), n));  // heads' partial o_proj
  be.AddScaled(1.0f, delta.data(), x->data(), n);  // the residual add, vectorized (1 · d is d)
  std::copy(x->begin(), x->end(), h.begin());
  be.RmsNormRows(h.data(), tokens, c.hidden_size, c.hidden_size, w.post_attention_layernorm.data(),
                 c.rms_norm_eps);
  if (w.is_moe) {
    RETURN_IF_ERROR(MoeForward(c, w.moe, h.data(), tokens, delta.data(), be, &routed_pairs_));
  } else {
    RETURN_IF_ERROR(MlpForward(w.dense_mlp, h.data(), tokens, delta.data(), be));
  }
  // Experts of other ranks, other ranks' share of the intermediate dimension.
  if (comm_ != nullptr) RETURN_IF_ERROR(comm_->AllReduceSum(delta.data(), n));
  be.AddScaled(1.0f, delta.data(), x->data(), n);  // the residual add, vectorized (1 · d is d)
  return Status::Ok();
}

}  // namespace tandem::engine::model
