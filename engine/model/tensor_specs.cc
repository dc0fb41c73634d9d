#include "engine/model/tensor_specs.h"

namespace tandem::engine::model {
namespace {

constexpr std::string_view kWeight = ".weight";

class Emitter {
 public:
  Emitter(const ModelConfig& c, const std::function<void(const TensorSpec&)>& fn) : c_(c), fn_(fn) {}

  void Emit(std::string name, std::vector<int64_t> shape, bool linear, TensorRole role, Slot slot,
            int32_t layer = -1, int32_t expert = -1) {
    spec_.name = c_.tensor_prefix + std::move(name);
    spec_.shape = std::move(shape);
    spec_.linear = linear;
    spec_.role = role;
    spec_.slot = slot;
    spec_.layer = layer;
    spec_.expert = expert;
    fn_(spec_);
  }

  void Mlp(const std::string& p, int64_t inter, TensorRole role, Slot gate, int32_t layer,
           int32_t expert = -1) {
    const int64_t h = c_.hidden_size;
    Emit(p + "gate_proj.weight", {inter, h}, true, role, gate, layer, expert);
    Emit(p + "up_proj.weight", {inter, h}, true, role, static_cast<Slot>(static_cast<int>(gate) + 1), layer,
         expert);
    Emit(p + "down_proj.weight", {h, inter}, true, role, static_cast<Slot>(static_cast<int>(gate) + 2), layer,
         expert);
  }

  void Attention(const std::string& p, int32_t l) {
    const int64_t h = c_.hidden_size, heads = c_.num_attention_heads;
    const TensorRole a = TensorRole::kAttention;
    if (c_.has_q_lora()) {
      Emit(p + "q_a_proj.weight", {c_.q_lora_rank, h}, true, a, Slot::kQAProj, l);
      Emit(p + "q_a_layernorm.weight", {c_.q_lora_rank}, false, TensorRole::kNorm, Slot::kQANorm, l);
      Emit(p + "q_b_proj.weight", {heads * c_.qk_head_dim(), c_.q_lora_rank}, true, a, Slot::kQBProj, l);
    } else {
      Emit(p + "q_proj.weight", {heads * c_.qk_head_dim(), h}, true, a, Slot::kQProj, l);
    }
    Emit(p + "kv_a_proj_with_mqa.weight", {c_.KvLatentWidth(), h}, true, a, Slot::kKvAProj, l);
    Emit(p + "kv_a_layernorm.weight", {c_.kv_lora_rank}, false, TensorRole::kNorm, Slot::kKvANorm, l);
    Emit(p + "kv_b_proj.weight", {heads * (c_.qk_nope_head_dim + c_.v_head_dim), c_.kv_lora_rank}, true, a,
         Slot::kKvBProj, l);
    Emit(p + "o_proj.weight", {h, heads * c_.v_head_dim}, true, a, Slot::kOProj, l);
    if (!c_.HasIndexerWeights(l)) return;
    const DsaIndexerConfig& ix = c_.indexer;
    const TensorRole r = TensorRole::kIndexer;
    const std::string q = p + "indexer.";
    Emit(q + "wq_b.weight", {ix.n_heads * ix.head_dim, c_.q_lora_rank}, true, r, Slot::kIndexerWqB, l);
    Emit(q + "wk.weight", {ix.head_dim, h}, true, r, Slot::kIndexerWk, l);
    Emit(q + "k_norm.weight", {ix.head_dim}, false, r, Slot::kIndexerKNormWeight, l);
    Emit(q + "k_norm.bias", {ix.head_dim}, false, r, Slot::kIndexerKNormBias, l);
    Emit(q + "weights_proj.weight", {ix.n_heads, h}, true, r, Slot::kIndexerWeightsProj, l);
  }

  void Layer(int32_t l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int64_t h = c_.hidden_size;
    Emit(p + "input_layernorm.weight", {h}, false, TensorRole::kNorm, Slot::kInputNorm, l);
    Attention(p + "self_attn.", l);
    Emit(p + "post_attention_layernorm.weight", {h}, false, TensorRole::kNorm, Slot::kPostAttentionNorm, l);
    if (!c_.IsMoeLayer(l)) {
      Mlp(p + "mlp.", c_.intermediate_size, TensorRole::kDenseMlp, Slot::kDenseGate, l);
      return;
    }
    Emit(p + "mlp.gate.weight", {c_.n_routed_experts, h}, false, TensorRole::kRouter, Slot::kRouter, l);
    if (c_.topk_method == TopkMethod::kNoAuxTc) {
      Emit(p + "mlp.gate.e_score_correction_bias", {c_.n_routed_experts}, false, TensorRole::kRouter,
           Slot::kRouterBias, l);
    }
    if (c_.n_shared_experts > 0) {
      Mlp(p + "mlp.shared_experts.", c_.moe_intermediate_size * c_.n_shared_experts,
          TensorRole::kSharedExpert, Slot::kSharedGate, l);
    }
    for (int32_t e = 0; e < c_.n_routed_experts; ++e) {
      Mlp(p + "mlp.experts." + std::to_string(e) + ".", c_.moe_intermediate_size, TensorRole::kRoutedExpert,
          Slot::kExpertGate, l, e);
    }
  }

  void All() {
    Emit("model.embed_tokens.weight", {c_.vocab_size, c_.hidden_size}, false, TensorRole::kEmbedding,
         Slot::kEmbedTokens);
    for (int32_t l = 0; l < c_.num_hidden_layers; ++l) Layer(l);
    Emit("model.norm.weight", {c_.hidden_size}, false, TensorRole::kNorm, Slot::kFinalNorm);
    if (!c_.tie_word_embeddings) {
      Emit("lm_head.weight", {c_.vocab_size, c_.hidden_size}, true, TensorRole::kLmHead, Slot::kLmHead);
    }
  }

 private:
  const ModelConfig& c_;
  const std::function<void(const TensorSpec&)>& fn_;
  TensorSpec spec_;
};

}  // namespace

int64_t TensorSpec::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string_view TensorSpec::module() const {
  std::string_view n = name;
  if (n.ends_with(kWeight)) n.remove_suffix(kWeight.size());
  return n;
}

void ForEachTensorSpec(const ModelConfig& config, const std::function<void(const TensorSpec&)>& fn) {
  Emitter(config, fn).All();
}

std::vector<TensorSpec> TensorSpecs(const ModelConfig& config) {
  std::vector<TensorSpec> out;
  ForEachTensorSpec(config, [&](const TensorSpec& s) { out.push_back(s); });
  return out;
}

}  // namespace tandem::engine::model
