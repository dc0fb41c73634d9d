#pragma once
// ModelConfig: every config.json field that changes the math of an MLA + MoE model, for the two
// architectures Tandem serves (docs/model.md):
//   - deepseek_v3 (also `kimi_k2`, and Kimi K2.5/K2.6's `kimi_k25` whose text model sits under
//     `text_config` and whose tensors carry the `language_model.` prefix);
//   - glm_moe_dsa (GLM 5.x: deepseek_v3's MLA + MoE plus the DSA indexer).
// Field names are Hugging Face's. ParseModelConfig validates shapes and names the field at fault.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/core/dtype.h"

namespace tandem::engine::model {

enum class Architecture : uint8_t { kDeepseekV3, kGlmMoeDsa };
std::string_view ArchitectureName(Architecture a);  // "deepseek_v3" | "glm_moe_dsa"

enum class ScoringFunc : uint8_t { kSigmoid, kSoftmax };
// noaux_tc: group-limited top-k over sigmoid scores + e_score_correction_bias (DeepSeek-V3, Kimi,
// GLM). greedy: plain top-k, no bias tensor. group_limited_greedy: group max, no bias (V2).
enum class TopkMethod : uint8_t { kNoAuxTc, kGreedy, kGroupLimitedGreedy };

// RoPE over the qk_rope_head_dim slice. `yarn` false: plain RoPE with `theta`.
struct RopeConfig {
  double theta = 10000.0;
  bool yarn = false;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;                     // 0 = absent (HF treats absent and 0 alike)
  double mscale_all_dim = 0.0;             // 0 = absent
  std::optional<double> attention_factor;  // explicit cos/sin multiplier, else derived
  bool truncate = true;                    // floor/ceil the YaRN correction range
  // Pairs (x0,x1),(x2,x3)... rotate together (DeepSeek/GLM checkpoints), else rotate_half.
  bool interleave = true;

  // The cos/sin multiplier: attention_factor, else mscale(f, mscale) / mscale(f, mscale_all_dim)
  // when both are set, else mscale(f, 1) (1.0 for plain RoPE). mscale(f, m) = 0.1 m ln f + 1.
  double AttentionFactor() const;
  // The extra softmax scale: mscale(factor, mscale_all_dim)^2 for YaRN with mscale_all_dim, else 1.
  double SoftmaxScaleMultiplier() const;
};

// GLM's DeepSeek Sparse Attention indexer (glm_moe_dsa only).
struct DsaIndexerConfig {
  int64_t n_heads = 0;   // index_n_heads
  int64_t head_dim = 0;  // index_head_dim (its first qk_rope_head_dim values get RoPE)
  int64_t topk = 0;      // index_topk
  // Per layer: true runs its own indexer ("full"), false reuses the previous full layer's top-k
  // ("shared") and has no indexer weights. From indexer_types, index_topk_pattern ("FSS..."), or
  // index_topk_freq / index_skip_topk_offset (default: every layer full).
  std::vector<bool> full_layers;
};

// `quantization_config`: what each Linear weight of the checkpoint is stored as.
struct QuantizationConfig {
  enum class Method : uint8_t { kNone, kFp8Block128, kCompressedInt4 };
  Method method = Method::kNone;
  // fp8: modules_to_not_convert; compressed-tensors: ignore. Entries are module names
  // ("lm_head", "model.layers.0.mlp.down_proj") or "re:<regex>" matched from the name's start.
  std::vector<std::string> excluded;
  // compressed-tensors config_groups targets ("Linear" = every Linear, or names / "re:" regexes).
  std::vector<std::string> targets;

  // The format of the Linear module `module` (no ".weight"): int4 for a targeted, non-ignored
  // module; fp8 for every Linear but lm_head and the excluded; else bf16 (BF16/F16/F32 on disk).
  WeightFormat FormatFor(std::string_view module) const;
};

struct ModelConfig {
  Architecture architecture = Architecture::kDeepseekV3;
  std::string model_type;     // as written: deepseek_v3 | kimi_k2 | kimi_k25 | glm_moe_dsa
  std::string tensor_prefix;  // "" or "language_model." (kimi_k25 checkpoints)

  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;

  // MLA
  int64_t num_attention_heads = 0;
  int64_t q_lora_rank = 0;  // 0: config had null -> plain q_proj
  int64_t kv_lora_rank = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t v_head_dim = 0;
  RopeConfig rope;

  // MLP / MoE
  int64_t intermediate_size = 0;  // dense layers
  int64_t moe_intermediate_size = 0;
  int64_t n_routed_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t n_shared_experts = 0;
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = true;
  ScoringFunc scoring_func = ScoringFunc::kSigmoid;
  TopkMethod topk_method = TopkMethod::kNoAuxTc;

  DsaIndexerConfig indexer;  // glm_moe_dsa only; n_heads == 0 otherwise
  QuantizationConfig quantization;

  // ---- derived --------------------------------------------------------------------------
  bool has_q_lora() const { return q_lora_rank > 0; }
  bool has_indexer() const { return architecture == Architecture::kGlmMoeDsa; }
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // Layer `layer` has a MoE block: layer >= first_k_dense_replace and layer % moe_layer_freq == 0.
  bool IsMoeLayer(int64_t layer) const;
  int64_t NumMoeLayers() const;
  // Layer `layer` owns indexer weights (glm_moe_dsa and a "full" layer).
  bool HasIndexerWeights(int64_t layer) const;
  // Softmax scale of MLA attention: qk_head_dim^-0.5 * rope.SoftmaxScaleMultiplier().
  double AttentionSoftmaxScale() const;
  // The latent row one token writes per layer: kv_lora_rank + qk_rope_head_dim values.
  int64_t KvLatentWidth() const { return kv_lora_rank + qk_rope_head_dim; }
};

// Parses a Hugging Face config.json text. Errors: DataLoss for malformed JSON; InvalidArgument
// naming the field for an unknown model_type, a missing or mistyped field, or inconsistent
// shapes (see ValidateModelConfig).
StatusOr<ModelConfig> ParseModelConfig(std::string_view config_json);
// Reads `dir`/config.json. NotFound when it is missing; otherwise as ParseModelConfig.
StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);

// Checks shapes: positive sizes, num_experts_per_tok <= n_routed_experts, topk_group <= n_group,
// n_routed_experts % n_group == 0, first_k_dense_replace <= num_hidden_layers, indexer sizes...
// InvalidArgument naming the field.
Status ValidateModelConfig(const ModelConfig& config);

// A Hugging Face config.json text that ParseModelConfig reads back to `config` (the dummy
// checkpoint writer uses it). Writes the flat (non-nested) form; tensor_prefix is not kept.
std::string ModelConfigToJson(const ModelConfig& config);

}  // namespace tandem::engine::model
