#include "engine/model/model_weights.h"

namespace tandem::engine::model {
namespace {

MlpWeights* MlpOf(ModelWeights* w, const TensorSpec& s) {
  LayerWeights& l = w->layers[s.layer];
  switch (s.slot) {
    case Slot::kDenseGate:
    case Slot::kDenseUp:
    case Slot::kDenseDown: return &l.dense_mlp;
    case Slot::kSharedGate:
    case Slot::kSharedUp:
    case Slot::kSharedDown: return &l.moe.shared_experts;
    default: return &l.moe.experts[s.expert];
  }
}

PackedWeight* MlpMember(MlpWeights* m, int index) {
  return index == 0 ? &m->gate_proj : index == 1 ? &m->up_proj : &m->down_proj;
}

int64_t Bytes(const PackedWeight& p) { return p.rows() == 0 ? 0 : p.StreamedBytes(); }
int64_t Bytes(const FloatBuffer& b) { return static_cast<int64_t>(b.size() * sizeof(float)); }

}  // namespace

ModelWeights MakeSkeleton(const ModelConfig& config) {
  ModelWeights w;
  w.config = config;
  w.lm_head_tied = config.tie_word_embeddings;
  w.layers.resize(static_cast<size_t>(config.num_hidden_layers));
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    LayerWeights& layer = w.layers[l];
    layer.is_moe = config.IsMoeLayer(l);
    if (layer.is_moe) layer.moe.experts.resize(static_cast<size_t>(config.n_routed_experts));
    if (config.HasIndexerWeights(l)) layer.indexer.emplace();
  }
  return w;
}

PackedWeight* LinearSlot(ModelWeights* w, const TensorSpec& s) {
  if (!s.linear) return nullptr;
  if (s.slot == Slot::kLmHead) return &w->lm_head;
  LayerWeights& l = w->layers[s.layer];
  switch (s.slot) {
    case Slot::kQProj: return &l.attn.q_proj;
    case Slot::kQAProj: return &l.attn.q_a_proj;
    case Slot::kQBProj: return &l.attn.q_b_proj;
    case Slot::kKvAProj: return &l.attn.kv_a_proj_with_mqa;
    case Slot::kKvBProj: return &l.attn.kv_b_proj;
    case Slot::kOProj: return &l.attn.o_proj;
    case Slot::kIndexerWqB: return &l.indexer->wq_b;
    case Slot::kIndexerWk: return &l.indexer->wk;
    case Slot::kIndexerWeightsProj: return &l.indexer->weights_proj;
    case Slot::kDenseGate:
    case Slot::kSharedGate:
    case Slot::kExpertGate: return MlpMember(MlpOf(w, s), 0);
    case Slot::kDenseUp:
    case Slot::kSharedUp:
    case Slot::kExpertUp: return MlpMember(MlpOf(w, s), 1);
    case Slot::kDenseDown:
    case Slot::kSharedDown:
    case Slot::kExpertDown: return MlpMember(MlpOf(w, s), 2);
    default: return nullptr;
  }
}

FloatBuffer* FloatSlot(ModelWeights* w, const TensorSpec& s) {
  if (s.linear) return nullptr;
  if (s.slot == Slot::kEmbedTokens) return &w->embed_tokens;
  if (s.slot == Slot::kFinalNorm) return &w->norm;
  LayerWeights& l = w->layers[s.layer];
  switch (s.slot) {
    case Slot::kInputNorm: return &l.input_layernorm;
    case Slot::kPostAttentionNorm: return &l.post_attention_layernorm;
    case Slot::kQANorm: return &l.attn.q_a_layernorm;
    case Slot::kKvANorm: return &l.attn.kv_a_layernorm;
    case Slot::kIndexerKNormWeight: return &l.indexer->k_norm_weight;
    case Slot::kIndexerKNormBias: return &l.indexer->k_norm_bias;
    case Slot::kRouter: return &l.moe.router;
    case Slot::kRouterBias: return &l.moe.e_score_correction_bias;
    default: return nullptr;
  }
}

const PackedWeight* FindLinear(const ModelWeights& w, const TensorSpec& s) {
  if (s.layer >= static_cast<int32_t>(w.layers.size())) return nullptr;
  return LinearSlot(const_cast<ModelWeights*>(&w), s);
}

const FloatBuffer* FindFloat(const ModelWeights& w, const TensorSpec& s) {
  if (s.layer >= static_cast<int32_t>(w.layers.size())) return nullptr;
  return FloatSlot(const_cast<ModelWeights*>(&w), s);
}

int64_t ModelWeights::ResidentBytes() const {
  int64_t total = Bytes(embed_tokens) + Bytes(norm) + Bytes(lm_head);
  ForEachTensorSpec(config, [&](const TensorSpec& s) {
    if (s.layer < 0) return;
    const PackedWeight* p = FindLinear(*this, s);
    const FloatBuffer* f = FindFloat(*this, s);
    total += p != nullptr ? Bytes(*p) : f != nullptr ? Bytes(*f) : 0;
  });
  return total;
}

std::array<int64_t, 3> ModelWeights::LinearFormatCounts() const {
  std::array<int64_t, 3> counts{};
  ForEachTensorSpec(config, [&](const TensorSpec& s) {
    const PackedWeight* p = s.linear ? FindLinear(*this, s) : nullptr;
    if (p != nullptr && p->rows() > 0) ++counts[static_cast<int>(p->format())];
  });
  if (lm_head_tied && lm_head.rows() > 0) ++counts[static_cast<int>(lm_head.format())];
  return counts;
}

}  // namespace tandem::engine::model
