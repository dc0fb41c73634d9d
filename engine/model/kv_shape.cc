#include "engine/model/kv_shape.h"

#include <vector>

namespace tandem::engine::model {

kv::KvShape KvShapeFor(const ModelConfig& config) {
  kv::KvShape s;
  s.num_layers = static_cast<size_t>(config.num_hidden_layers);
  s.kv_lora_rank = static_cast<size_t>(config.kv_lora_rank);
  s.rope_dim = static_cast<size_t>(config.qk_rope_head_dim);
  if (!config.has_indexer()) return s;
  s.index_head_dim = static_cast<size_t>(config.indexer.head_dim);
  std::vector<bool> layers(s.num_layers);
  bool every = true;
  for (size_t l = 0; l < s.num_layers; ++l) {
    layers[l] = config.HasIndexerWeights(static_cast<int64_t>(l));
    every = every && layers[l];
  }
  if (!every) s.index_layers = std::move(layers);
  return s;
}

std::string DescribeKvShape(const kv::KvShape& shape) {
  std::string out = std::to_string(shape.num_layers) + " layers x (" + std::to_string(shape.kv_lora_rank) +
                    " + " + std::to_string(shape.rope_dim) + ")";
  if (shape.index_head_dim > 0) {
    out += ", indexer keys " + std::to_string(shape.index_head_dim) + " on " +
           std::to_string(shape.num_index_layers()) + " layers";
  }
  return out;
}

}  // namespace tandem::engine::model
