#include "engine/io/checkpoint_writer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/atomic_file.h"
#include "engine/io/checkpoint.h"

namespace tandem::engine::io {
namespace {

namespace fs = std::filesystem;

// Greedy packing of name-sorted tensors into shards.
std::vector<std::vector<TensorToWrite>> Pack(std::vector<TensorToWrite> sorted, uint64_t max_shard_bytes) {
  std::vector<std::vector<TensorToWrite>> shards;
  uint64_t shard_bytes = 0;
  for (TensorToWrite& t : sorted) {
    if (shards.empty() || (shard_bytes > 0 && shard_bytes + t.data.size() > max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shard_bytes += t.data.size();
    shards.back().push_back(std::move(t));
  }
  return shards;
}

std::string ShardName(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

}  // namespace

Status WriteCheckpoint(const std::string& dir, std::span<const TensorToWrite> tensors,
                       uint64_t max_shard_bytes, const SafetensorsMetadata& metadata) {
  if (max_shard_bytes == 0) return Status::InvalidArgument("max_shard_bytes must be positive");
  std::vector<TensorToWrite> sorted(tensors.begin(), tensors.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i].name == sorted[i - 1].name) {
      return Status::InvalidArgument("duplicate tensor '" + sorted[i].name + "'");
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Internal("creating " + dir + ": " + ec.message());

  const fs::path root(dir);
  std::vector<std::vector<TensorToWrite>> shards = Pack(std::move(sorted), max_shard_bytes);
  if (shards.size() <= 1) {
    fs::remove(root / kIndexFileName, ec);
    const std::vector<TensorToWrite> none;
    return WriteSafetensors((root / kSingleFileName).string(), shards.empty() ? none : shards[0], metadata);
  }

  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total_bytes = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = ShardName(i, shards.size());
    RETURN_IF_ERROR(WriteSafetensors((root / name).string(), shards[i], metadata));
    for (const TensorToWrite& t : shards[i]) {
      weight_map[t.name] = name;
      total_bytes += t.data.size();
    }
  }
  nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", std::move(weight_map)}};
  const std::string text = index.dump(2) + "\n";
  const std::span<const std::byte> pieces[] = {std::as_bytes(std::span(text))};
  return WriteFileAtomically((root / kIndexFileName).string(), pieces);
}

}  // namespace tandem::engine::io
