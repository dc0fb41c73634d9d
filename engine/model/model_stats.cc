#include "engine/model/model_stats.h"

#include "engine/formats/weights.h"

namespace tandem::engine::model {

ParameterCounts CountParameters(const ModelConfig& config) {
  ParameterCounts c;
  ForEachTensorSpec(config, [&](const TensorSpec& s) {
    const int64_t n = s.num_elements();
    c.total += n;
    if (s.role == TensorRole::kRoutedExpert) c.routed_expert += n;
    if (s.role == TensorRole::kEmbedding || s.role == TensorRole::kLmHead) c.embedding += n;
  });
  c.non_expert = c.total - c.routed_expert;
  const int64_t per_expert = 3 * config.hidden_size * config.moe_intermediate_size;
  c.active = c.non_expert + config.NumMoeLayers() * config.num_experts_per_tok * per_expert;
  return c;
}

std::string_view WeightSchemeName(WeightScheme s) {
  switch (s) {
    case WeightScheme::kBf16: return "bf16";
    case WeightScheme::kFp8: return "fp8";
    case WeightScheme::kInt4: return "int4";
    case WeightScheme::kInt4Fp8: return "int4+fp8";
  }
  return "?";
}

WeightFormat SchemeFormat(WeightScheme scheme, const TensorSpec& spec) {
  if (!spec.linear) return WeightFormat::kBf16;
  const bool expert = spec.role == TensorRole::kRoutedExpert;
  const bool fp8_ok = spec.role != TensorRole::kLmHead;
  switch (scheme) {
    case WeightScheme::kBf16: return WeightFormat::kBf16;
    case WeightScheme::kFp8: return fp8_ok ? WeightFormat::kFp8Block128 : WeightFormat::kBf16;
    case WeightScheme::kInt4: return expert ? WeightFormat::kInt4Group32 : WeightFormat::kBf16;
    case WeightScheme::kInt4Fp8:
      if (expert) return WeightFormat::kInt4Group32;
      return fp8_ok ? WeightFormat::kFp8Block128 : WeightFormat::kBf16;
  }
  return WeightFormat::kBf16;
}

int64_t LinearCheckpointBytes(WeightFormat format, int64_t rows, int64_t cols) {
  switch (format) {
    case WeightFormat::kBf16: return 2 * rows * cols;
    case WeightFormat::kFp8Block128: return rows * cols + 4 * Fp8ScaleRows(rows) * Fp8ScaleCols(cols);
    case WeightFormat::kInt4Group32:
      return 4 * rows * Int4PackedCols(cols) + 2 * rows * Int4ScaleCols(cols) + 16;
  }
  return 0;
}

int64_t CheckpointBytes(const ModelConfig& config, WeightScheme scheme) {
  int64_t bytes = 0;
  ForEachTensorSpec(config, [&](const TensorSpec& s) {
    if (s.linear) {
      bytes += LinearCheckpointBytes(SchemeFormat(scheme, s), s.shape[0], s.shape[1]);
    } else {
      bytes += s.num_elements() * (s.slot == Slot::kRouterBias ? 4 : 2);
    }
  });
  return bytes;
}

int64_t KvBytesPerTokenLayer(const ModelConfig& config, KvCacheDtype dtype) {
  return config.KvLatentWidth() * (dtype == KvCacheDtype::kBf16 ? 2 : 1);
}

int64_t DsaFp8KvBytesPerTokenLayer(const ModelConfig& config) {
  const int64_t scales = (config.kv_lora_rank + 127) / 128;
  return config.kv_lora_rank + 4 * scales + 2 * config.qk_rope_head_dim;
}

int64_t IndexerKeyBytesPerTokenLayer(const ModelConfig& config, KvCacheDtype dtype) {
  if (!config.has_indexer()) return 0;
  const int64_t d = config.indexer.head_dim;
  return dtype == KvCacheDtype::kBf16 ? 2 * d : d + 4;
}

int64_t KvBytesPerToken(const ModelConfig& config, KvCacheDtype dtype) {
  int64_t bytes = KvBytesPerTokenLayer(config, dtype) * config.num_hidden_layers;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    if (config.HasIndexerWeights(l)) bytes += IndexerKeyBytesPerTokenLayer(config, dtype);
  }
  return bytes;
}

}  // namespace tandem::engine::model
