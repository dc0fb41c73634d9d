#pragma once
// A model checkpoint directory: one `model.safetensors`, or shards named by
// `model.safetensors.index.json` ({"weight_map": {tensor: shard file}, "metadata": {...}}).

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/io/safetensors_file.h"

namespace tandem::engine::io {

inline constexpr std::string_view kSingleFileName = "model.safetensors";
inline constexpr std::string_view kIndexFileName = "model.safetensors.index.json";

// Every shard of a checkpoint, mapped and validated, with lookup by tensor name across them.
// Move-only; moves keep TensorViews valid. Thread-safe for concurrent readers.
class Checkpoint {
 public:
  // Opens `dir`. When the index exists it is authoritative and must agree exactly with the shards:
  // DataLoss for a tensor in two shards, a tensor the index places in a shard that lacks it, or a
  // tensor of a shard that the index does not list; NotFound for a missing shard. Shard names must
  // be plain file names inside `dir`. Without an index, `model.safetensors` is the one shard.
  // NotFound when neither file exists.
  static StatusOr<Checkpoint> Open(const std::string& dir);

  // The tensor called `name`, or nullptr.
  const TensorView* Find(std::string_view name) const;
  std::vector<std::string_view> TensorNames() const;  // sorted
  size_t num_tensors() const { return by_name_.size(); }
  const std::vector<SafetensorsFile>& shards() const { return shards_; }

 private:
  Checkpoint() = default;
  // Fills by_name_ from shards_. DataLoss when a tensor is in two shards.
  Status IndexShards();

  std::vector<SafetensorsFile> shards_;
  // Points into shards_[i].tensors(), whose buffers do not move when shards_ or *this moves.
  std::map<std::string_view, const TensorView*, std::less<>> by_name_;
  std::map<std::string_view, const SafetensorsFile*, std::less<>> shard_of_;
};

}  // namespace tandem::engine::io
