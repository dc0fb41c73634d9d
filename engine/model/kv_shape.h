#pragma once
// The KV page pool shape a model needs: its MLA latent rows and, for glm_moe_dsa, the DSA indexer
// key rows of the layers that run their own indexer. Every place that makes a PagePool for a
// ModelConfig takes its shape from here, so the pool, ModelRunner::Create's check and the byte
// counts (model_stats.h) agree.

#include <string>

#include "engine/kv/page_pool.h"
#include "engine/model/model_config.h"

namespace tandem::engine::model {

// num_hidden_layers x (kv_lora_rank + qk_rope_head_dim); glm_moe_dsa adds index_head_dim-wide
// indexer rows on the layers with indexer weights (ModelConfig::HasIndexerWeights; index_layers
// left empty when that is every layer).
kv::KvShape KvShapeFor(const ModelConfig& config);

// "78 layers x (512 + 64), indexer keys 128 on 78 layers", for error messages.
std::string DescribeKvShape(const kv::KvShape& shape);

}  // namespace tandem::engine::model
