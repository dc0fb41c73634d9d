#pragma once
// Memory math of a ModelConfig: parameter counts by kind, checkpoint bytes per weight scheme, and
// KV cache bytes per token. Pure arithmetic over TensorSpecs: safe for full-size configs.

#include <cstdint>
#include <string_view>

#include "engine/core/dtype.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_specs.h"

namespace tandem::engine::model {

struct ParameterCounts {
  int64_t total = 0;
  int64_t routed_expert = 0;  // every routed expert of every MoE layer
  int64_t non_expert = 0;     // total - routed_expert (embeddings, lm_head, shared experts included)
  int64_t embedding = 0;      // embed_tokens (+ lm_head when not tied)
  int64_t active = 0;         // per token: non_expert + num_experts_per_tok experts per MoE layer
  double ExpertRatio() const { return non_expert == 0 ? 0 : static_cast<double>(routed_expert) / non_expert; }
};
ParameterCounts CountParameters(const ModelConfig& config);

// How a deployment stores its Linear weights (embeddings, norms and the router stay BF16 on disk,
// e_score_correction_bias F32):
//   kBf16: every Linear bf16;
//   kFp8: every Linear but lm_head FP8 block-128 (`tandem quantize --to fp8`, DeepSeek/GLM FP8);
//   kInt4: routed experts INT4 group-32, the rest bf16 (Kimi K2 Thinking / K2.6 style);
//   kInt4Fp8: routed experts INT4, the rest FP8 (`tandem quantize --to int4` of an FP8 input).
enum class WeightScheme : uint8_t { kBf16, kFp8, kInt4, kInt4Fp8 };
std::string_view WeightSchemeName(WeightScheme s);  // "bf16" "fp8" "int4" "int4+fp8"
// The format `spec` (a Linear) has under `scheme`.
WeightFormat SchemeFormat(WeightScheme scheme, const TensorSpec& spec);

// Bytes of one Linear [rows, cols] as stored in a checkpoint:
//   bf16 2NK; fp8 NK + 4 ceil(N/128) ceil(K/128); int4 4 N ceil(K/8) + 2 N ceil(K/32) + 16 (shape).
int64_t LinearCheckpointBytes(WeightFormat format, int64_t rows, int64_t cols);
// Bytes of all of `config`'s tensors in a checkpoint written under `scheme`.
int64_t CheckpointBytes(const ModelConfig& config, WeightScheme scheme);

// KV cache, per token per layer. MLA latent (kv_lora + rope values): BF16 2 bytes each (1,152 for
// both production models), FP8 e4m3 with a per-tensor scale 1 byte each (576) — the PagePool layout.
int64_t KvBytesPerTokenLayer(const ModelConfig& config, KvCacheDtype dtype);
// FlashMLA's FP8 sparse-attention layout (DeepSeek-V3.2 DSA, used for GLM 5.x by SGLang/vLLM):
// kv_lora e4m3 values + one fp32 scale per 128 of them + the rope part in bf16: 512 + 16 + 128 = 656.
int64_t DsaFp8KvBytesPerTokenLayer(const ModelConfig& config);
// The DSA indexer's own key cache (glm_moe_dsa, layers with an indexer): index_head_dim values,
// bf16 (256 for GLM 5.x) or e4m3 plus one fp32 scale (132). 0 for deepseek_v3.
int64_t IndexerKeyBytesPerTokenLayer(const ModelConfig& config, KvCacheDtype dtype);
// All layers, what one token takes in the PagePool (PoolGeometry::token_bytes of KvShapeFor):
// KvBytesPerTokenLayer * num_hidden_layers plus IndexerKeyBytesPerTokenLayer per layer with an
// indexer. GLM 5.2: (1,152 + 256) * 78 = 109,824 BF16, (576 + 132) * 78 = 55,224 FP8.
int64_t KvBytesPerToken(const ModelConfig& config, KvCacheDtype dtype);

}  // namespace tandem::engine::model
