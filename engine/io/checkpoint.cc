#include "engine/io/checkpoint.h"

#include <filesystem>
#include <set>
#include <utility>

#include "engine/io/mapped_file.h"
#include "engine/io/strict_json.h"

namespace tandem::engine::io {
namespace {

namespace fs = std::filesystem;
using WeightMap = std::map<std::string, std::string>;  // tensor -> shard file name

constexpr uint64_t kMaxIndexBytes = 100'000'000;

bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

StatusOr<WeightMap> ReadIndex(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  if (file.data().size() > kMaxIndexBytes) return Status::DataLoss(path + ": index larger than 100 MB");
  std::string_view text(reinterpret_cast<const char*>(file.data().data()), file.data().size());
  StatusOr<nlohmann::json> index = ParseStrictJson(text);
  if (!index.ok()) return index.status().WithContext(path);
  auto weight_map = index->is_object() ? index->find("weight_map") : index->end();
  if (weight_map == index->end() || !weight_map->is_object()) {
    return Status::DataLoss(path + ": no \"weight_map\" object");
  }
  WeightMap map;
  for (const auto& [tensor, shard] : weight_map->items()) {
    if (!shard.is_string() || !IsPlainFileName(shard.get_ref<const std::string&>())) {
      return Status::DataLoss(path + ": tensor '" + tensor + "' maps to " + shard.dump() +
                              ", not a file name in the checkpoint directory");
    }
    map.emplace(tensor, shard.get<std::string>());
  }
  return map;
}

}  // namespace

Status Checkpoint::IndexShards() {
  for (const SafetensorsFile& shard : shards_) {
    for (const TensorView& tensor : shard.tensors()) {
      auto [it, inserted] = shard_of_.emplace(tensor.name, &shard);
      if (!inserted) {
        return Status::DataLoss("tensor '" + tensor.name + "' is in two shards: " + it->second->path() +
                                " and " + shard.path());
      }
      by_name_.emplace(tensor.name, &tensor);
    }
  }
  return Status::Ok();
}

StatusOr<Checkpoint> Checkpoint::Open(const std::string& dir) {
  const fs::path root(dir);
  const std::string index_path = (root / kIndexFileName).string();
  const std::string single_path = (root / kSingleFileName).string();
  std::error_code ec;
  Checkpoint checkpoint;
  if (!fs::exists(index_path, ec)) {
    if (!fs::exists(single_path, ec)) {
      return Status::NotFound(dir + ": neither " + std::string(kSingleFileName) + " nor " +
                              std::string(kIndexFileName));
    }
    ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(single_path));
    checkpoint.shards_.push_back(std::move(file));
    RETURN_IF_ERROR(checkpoint.IndexShards());
    return checkpoint;
  }

  ASSIGN_OR_RETURN(WeightMap weight_map, ReadIndex(index_path));
  std::set<std::string> shard_names;
  for (const auto& [tensor, shard] : weight_map) shard_names.insert(shard);
  for (const std::string& name : shard_names) {
    StatusOr<SafetensorsFile> shard = SafetensorsFile::Open((root / name).string());
    if (!shard.ok()) return shard.status().WithContext(index_path + " lists shard " + name);
    checkpoint.shards_.push_back(std::move(shard).value());
  }
  RETURN_IF_ERROR(checkpoint.IndexShards());

  for (const auto& [tensor, shard] : weight_map) {
    auto found = checkpoint.shard_of_.find(tensor);
    const std::string expected = (root / shard).string();
    if (found == checkpoint.shard_of_.end() || found->second->path() != expected) {
      return Status::DataLoss(index_path + ": tensor '" + tensor + "' is listed in shard " + shard +
                              " but that shard does not hold it");
    }
  }
  for (const auto& [tensor, shard] : checkpoint.shard_of_) {
    if (!weight_map.contains(std::string(tensor))) {
      return Status::DataLoss(index_path + ": tensor '" + std::string(tensor) + "' of shard " +
                              shard->path() + " is not listed in the index");
    }
  }
  return checkpoint;
}

const TensorView* Checkpoint::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<std::string_view> Checkpoint::TensorNames() const {
  std::vector<std::string_view> names;
  names.reserve(by_name_.size());
  for (const auto& [name, view] : by_name_) names.push_back(name);
  return names;
}

}  // namespace tandem::engine::io
