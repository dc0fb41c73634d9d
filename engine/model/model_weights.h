#pragma once
// ModelWeights: every tensor of a loaded model, in the form the forward pass consumes.
// Linear weights are kernels::cpu::PackedWeight (bf16, fp8 block-128 or int4 group-32, as the
// checkpoint stored them); embeddings, norms and the MoE router are fp32 AlignedBuffers.
// Shapes follow tensor_specs.h. A PackedWeight with rows() == 0 / an empty buffer is absent.
// Move-only; immutable after loading, so concurrent readers are safe.

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/status.h"
#include "engine/core/aligned_buffer.h"
#include "engine/kernels/cpu/matmul.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_specs.h"

namespace tandem::engine::model {

using kernels::cpu::PackedWeight;
using FloatBuffer = AlignedBuffer<float>;

// Multi-head latent attention of one layer.
struct MlaWeights {
  PackedWeight q_proj;              // [heads*(nope+rope), hidden]; only when q_lora_rank is null
  PackedWeight q_a_proj;            // [q_lora, hidden]
  FloatBuffer q_a_layernorm;        // [q_lora] RMSNorm
  PackedWeight q_b_proj;            // [heads*(nope+rope), q_lora]
  PackedWeight kv_a_proj_with_mqa;  // [kv_lora + rope, hidden]
  FloatBuffer kv_a_layernorm;       // [kv_lora] RMSNorm
  PackedWeight kv_b_proj;           // [heads*(nope+v), kv_lora]
  PackedWeight o_proj;              // [hidden, heads*v]
};

// GLM's DSA indexer (layers whose indexer_types entry is "full").
struct DsaIndexerWeights {
  PackedWeight wq_b;          // [index_heads*index_dim, q_lora]
  PackedWeight wk;            // [index_dim, hidden]
  FloatBuffer k_norm_weight;  // [index_dim] LayerNorm (eps 1e-6)
  FloatBuffer k_norm_bias;    // [index_dim]
  PackedWeight weights_proj;  // [index_heads, hidden]
};

// SwiGLU MLP: down(silu(gate x) * up x).
struct MlpWeights {
  PackedWeight gate_proj;  // [inter, hidden]
  PackedWeight up_proj;    // [inter, hidden]
  PackedWeight down_proj;  // [hidden, inter]
};

struct MoeWeights {
  FloatBuffer router;                   // [n_routed_experts, hidden] (mlp.gate.weight)
  FloatBuffer e_score_correction_bias;  // [n_routed_experts]; empty unless topk_method noaux_tc
  MlpWeights shared_experts;            // inter = moe_inter * n_shared_experts; absent when 0
  std::vector<MlpWeights> experts;      // [n_routed_experts], inter = moe_intermediate_size
};

struct LayerWeights {
  FloatBuffer input_layernorm;           // [hidden]
  FloatBuffer post_attention_layernorm;  // [hidden]
  MlaWeights attn;
  std::optional<DsaIndexerWeights> indexer;  // glm_moe_dsa "full" layers
  bool is_moe = false;
  MlpWeights dense_mlp;  // !is_moe: inter = intermediate_size
  MoeWeights moe;        // is_moe
};

struct ModelWeights {
  ModelConfig config;
  FloatBuffer embed_tokens;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  FloatBuffer norm;  // [hidden]
  // [vocab, hidden]. With tie_word_embeddings a bf16 copy of embed_tokens (lm_head_tied true).
  PackedWeight lm_head;
  bool lm_head_tied = false;

  // Bytes held (packed weights, scales and fp32 buffers).
  int64_t ResidentBytes() const;
  // How many Linear weights are stored in each format: [bf16, fp8, int4].
  std::array<int64_t, 3> LinearFormatCounts() const;
};

// An empty ModelWeights shaped for `config`: layers, experts and optional parts allocated as
// containers, every tensor still empty.
ModelWeights MakeSkeleton(const ModelConfig& config);
// The member `spec` fills: exactly one of the two is non-null.
PackedWeight* LinearSlot(ModelWeights* w, const TensorSpec& spec);
FloatBuffer* FloatSlot(ModelWeights* w, const TensorSpec& spec);
// Read-only twins (nullptr when the slot does not exist in `w`).
const PackedWeight* FindLinear(const ModelWeights& w, const TensorSpec& spec);
const FloatBuffer* FindFloat(const ModelWeights& w, const TensorSpec& spec);

}  // namespace tandem::engine::model
