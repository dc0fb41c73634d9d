#include "engine/io/safetensors_writer.h"

#include <algorithm>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/io/atomic_file.h"
#include "engine/io/safetensors_dtype.h"

namespace tandem::engine::io {
namespace {

Status CheckTensor(const TensorToWrite& t) {
  if (t.name.empty()) return Status::InvalidArgument("tensor with an empty name");
  if (t.name == "__metadata__")
    return Status::InvalidArgument("'__metadata__' is reserved, not a tensor name");
  uint64_t bytes = DTypeBytes(t.dtype);
  for (int64_t dim : t.shape) {
    if (dim < 0) return Status::InvalidArgument("tensor '" + t.name + "': negative dimension");
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
      return Status::InvalidArgument("tensor '" + t.name + "': size overflows 64 bits");
    }
  }
  if (bytes != t.data.size()) {
    return Status::InvalidArgument("tensor '" + t.name + "': shape and dtype need " + std::to_string(bytes) +
                                   " bytes, data has " + std::to_string(t.data.size()));
  }
  return Status::Ok();
}

void AppendU64Le(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

StatusOr<SafetensorsPlan> PlanSafetensors(std::span<const TensorToWrite> tensors,
                                          const SafetensorsMetadata& metadata) {
  SafetensorsPlan plan;
  std::set<std::string_view> names;
  for (const TensorToWrite& t : tensors) {
    RETURN_IF_ERROR(CheckTensor(t));
    if (!names.insert(t.name).second) return Status::InvalidArgument("duplicate tensor '" + t.name + "'");
    plan.order.push_back(&t);
  }
  std::sort(plan.order.begin(), plan.order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    size_t a_bytes = DTypeBytes(a->dtype), b_bytes = DTypeBytes(b->dtype);
    return a_bytes != b_bytes ? a_bytes > b_bytes : a->name < b->name;
  });

  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorToWrite* t : plan.order) {
    header[t->name] = {{"dtype", SafetensorsDTypeName(t->dtype)},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + t->data.size()}}};
    offset += t->data.size();
  }
  std::string json_text;
  try {
    json_text = header.dump();
  } catch (const nlohmann::json::type_error& e) {
    return Status::InvalidArgument(std::string("a tensor name or metadata string is not valid UTF-8: ") +
                                   e.what());
  } catch (const std::exception& e) {
    return Status::Internal(std::string("encoding the safetensors header: ") + e.what());
  }
  json_text.append((8 - json_text.size() % 8) % 8, ' ');
  plan.header.reserve(8 + json_text.size());
  AppendU64Le(plan.header, json_text.size());
  plan.header += json_text;
  plan.file_bytes = plan.header.size() + offset;
  return plan;
}

StatusOr<std::vector<std::byte>> SerializeSafetensors(std::span<const TensorToWrite> tensors,
                                                      const SafetensorsMetadata& metadata) {
  ASSIGN_OR_RETURN(SafetensorsPlan plan, PlanSafetensors(tensors, metadata));
  std::vector<std::byte> image;
  image.reserve(plan.file_bytes);
  auto header = std::as_bytes(std::span(plan.header));
  image.insert(image.end(), header.begin(), header.end());
  for (const TensorToWrite* t : plan.order) image.insert(image.end(), t->data.begin(), t->data.end());
  return image;
}

Status WriteSafetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                        const SafetensorsMetadata& metadata) {
  ASSIGN_OR_RETURN(SafetensorsPlan plan, PlanSafetensors(tensors, metadata));
  std::vector<std::span<const std::byte>> pieces;
  pieces.reserve(plan.order.size() + 1);
  pieces.push_back(std::as_bytes(std::span(plan.header)));
  for (const TensorToWrite* t : plan.order) pieces.push_back(t->data);
  return WriteFileAtomically(path, pieces);
}

}  // namespace tandem::engine::io
