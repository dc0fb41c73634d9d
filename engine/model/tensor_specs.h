#pragma once
// The tensors a model of a given config has: Hugging Face names, shapes, and what they are for.
// One list drives the loader, the dummy generator, the checkpoint writer and the parameter counts.
//
// Names (P = ModelConfig::tensor_prefix, L = layer, E = expert; docs/model.md):
//   P model.embed_tokens.weight                  [vocab, hidden]          fp32 in memory
//   P model.layers.L.input_layernorm.weight      [hidden]                 fp32
//   P model.layers.L.post_attention_layernorm.weight
//   P model.layers.L.self_attn.q_a_proj.weight   [q_lora, hidden]         Linear
//   P model.layers.L.self_attn.q_a_layernorm.weight [q_lora]
//   P model.layers.L.self_attn.q_b_proj.weight   [heads*(nope+rope), q_lora]
//     (or self_attn.q_proj.weight [heads*(nope+rope), hidden] when q_lora_rank is null)
//   P model.layers.L.self_attn.kv_a_proj_with_mqa.weight [kv_lora+rope, hidden]
//   P model.layers.L.self_attn.kv_a_layernorm.weight [kv_lora]
//   P model.layers.L.self_attn.kv_b_proj.weight  [heads*(nope+v), kv_lora]
//   P model.layers.L.self_attn.o_proj.weight     [hidden, heads*v]
//   glm_moe_dsa, layers with their own indexer:
//   P model.layers.L.self_attn.indexer.wq_b.weight [index_heads*index_dim, q_lora]
//   P model.layers.L.self_attn.indexer.wk.weight   [index_dim, hidden]
//   P model.layers.L.self_attn.indexer.k_norm.weight / .bias [index_dim] (LayerNorm, eps 1e-6)
//   P model.layers.L.self_attn.indexer.weights_proj.weight [index_heads, hidden]
//   dense layers: P model.layers.L.mlp.(gate|up|down)_proj.weight  ([inter, hidden] / [hidden, inter])
//   MoE layers:   P model.layers.L.mlp.gate.weight [experts, hidden] fp32 (router)
//                 P model.layers.L.mlp.gate.e_score_correction_bias [experts] fp32 (noaux_tc)
//                 P model.layers.L.mlp.shared_experts.(gate|up|down)_proj.weight (inter = moe_inter*n_shared)
//                 P model.layers.L.mlp.experts.E.(gate|up|down)_proj.weight
//   P model.norm.weight [hidden];  P lm_head.weight [vocab, hidden] (absent when tied)

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/model_config.h"

namespace tandem::engine::model {

// What a tensor is for (parameter counts and quantization policy).
enum class TensorRole : uint8_t {
  kEmbedding,
  kNorm,
  kAttention,
  kIndexer,
  kDenseMlp,
  kRouter,
  kSharedExpert,
  kRoutedExpert,
  kLmHead
};

// Where a tensor lands in ModelWeights.
enum class Slot : uint8_t {
  kEmbedTokens,
  kFinalNorm,
  kLmHead,
  kInputNorm,
  kPostAttentionNorm,
  kQProj,
  kQAProj,
  kQANorm,
  kQBProj,
  kKvAProj,
  kKvANorm,
  kKvBProj,
  kOProj,
  kIndexerWqB,
  kIndexerWk,
  kIndexerKNormWeight,
  kIndexerKNormBias,
  kIndexerWeightsProj,
  kDenseGate,
  kDenseUp,
  kDenseDown,
  kRouter,
  kRouterBias,
  kSharedGate,
  kSharedUp,
  kSharedDown,
  kExpertGate,
  kExpertUp,
  kExpertDown,
};

struct TensorSpec {
  std::string name;            // full checkpoint name, e.g. "model.layers.3.mlp.experts.5.up_proj.weight"
  std::vector<int64_t> shape;  // Linear: [N out, K in]
  bool linear = false;         // a Linear weight (any WeightFormat) vs an fp32 tensor
  TensorRole role = TensorRole::kNorm;
  Slot slot = Slot::kFinalNorm;
  int32_t layer = -1;   // -1 for embeddings, final norm, lm_head
  int32_t expert = -1;  // routed experts only

  int64_t num_elements() const;
  // The module name of a Linear (name without ".weight"), as quantization configs name it.
  std::string_view module() const;
};

// Calls `fn` for every tensor of `config`, in a fixed order (embeddings, layers in order, final
// norm, lm_head). REQUIRES: a validated config.
void ForEachTensorSpec(const ModelConfig& config, const std::function<void(const TensorSpec&)>& fn);
std::vector<TensorSpec> TensorSpecs(const ModelConfig& config);

}  // namespace tandem::engine::model
