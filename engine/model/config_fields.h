#pragma once
// Internal to engine/model: typed reads of config.json fields, each error naming the field, and
// the parsers of the nested parts of a ModelConfig (RoPE, DSA indexer, quantization_config).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/model/model_config.h"

namespace tandem::engine::model {

// `fallback` is used when the key is absent (nullopt: the field is required); `null_value` when
// it is JSON null (nullopt: null is treated as absent). InvalidArgument on a wrong type.
StatusOr<int64_t> GetInt(const nlohmann::json& c, std::string_view key, std::optional<int64_t> fallback,
                         std::optional<int64_t> null_value = std::nullopt);
StatusOr<double> GetDouble(const nlohmann::json& c, std::string_view key, std::optional<double> fallback);
StatusOr<bool> GetBool(const nlohmann::json& c, std::string_view key, std::optional<bool> fallback);
StatusOr<std::string> GetString(const nlohmann::json& c, std::string_view key,
                                std::optional<std::string> fallback);

// rope_parameters (transformers 5) or rope_theta + rope_scaling (older configs); rope_interleave.
// glm_moe_dsa always interleaves (its modeling code has no switch).
Status ParseRope(const nlohmann::json& c, bool glm, int64_t max_position_embeddings, RopeConfig* rope);
// index_n_heads, index_head_dim, index_topk, indexer_types / index_topk_pattern / index_topk_freq.
Status ParseIndexer(const nlohmann::json& c, int64_t num_layers, DsaIndexerConfig* indexer);
// `quantization_config` of `c` (absent or null: none).
Status ParseQuantization(const nlohmann::json& c, QuantizationConfig* q);
nlohmann::json QuantizationToJson(const QuantizationConfig& q);

}  // namespace tandem::engine::model
